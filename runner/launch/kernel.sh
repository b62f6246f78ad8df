# gatekeeper: the shell kernel of a session (runner/launch, SessionProgram).
#
# The session's supervisor starts `sh -c <this> gatekeeper-kernel <ctl>
# <status> <main file>` once, at the session's first shell run. For each
# line "run" on the control fifo (fd 8) it checks the main file's syntax
# (sh -n: an error is printed and the run's code is 2) and sources it in
# this one shell, so that the working directory, the environment,
# variables, functions, options, traps and background jobs last; then it
# writes "done <code>" on the status fifo (fd 9). The script runs with fds
# 8 and 9 closed. `return N` ends a run with N; `exit` ends the shell (the
# session's state is lost). The interrupt at the run's timeout ends the
# running command and then the script with 130 (in a function, it returns
# from the function only). The kernel's own variables start with __gk_.
exec 8<"$1" 9>"$2"
__gk_main=$3
set --
__gk_int=
trap '__gk_int=1' INT
printf 'ready\n' >&9 # the supervisor may interrupt from now on
while :; do
  trap '__gk_int=1' INT
  if ! IFS= read -r __gk_cmd <&8; then
    [ -n "$__gk_int" ] || exit 0 # the supervisor is gone
    __gk_int=
    continue
  fi
  if sh -n "$__gk_main" 8<&- 9>&-; then
    __gk_int=
    trap '__gk_int=1; return 130' INT
    . "$__gk_main" 8<&- 9>&-
    __gk_c=$?
    # dash's loops can drop the trap's return status (an interrupt
    # in a loop's condition): the flag keeps it
    [ -z "$__gk_int" ] || __gk_c=130
    __gk_int=
  else
    __gk_c=2
  fi
  trap '__gk_int=1' INT
  printf 'done %d\n' "$__gk_c" >&9
done

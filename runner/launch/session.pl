# gatekeeper: a session's client and supervisor (runner/launch, SessionProgram).
#
# One program, two roles. The launcher runs the client for each run of a
# session sandbox:
#   perl -e "$SESSION" -- client <lang> <soft seconds> <first>
# with fd 4 a pipe to init, on which the client writes exactly one line,
# "<code> <state>\n" (state k, i, t or l), before it exits 0. On the
# session's first run (first=1) the client makes the supervisor: it binds
# the session's socket, then forks it off as a daemon (setsid, double fork,
# standard streams on /dev/null, no other descriptor kept but the
# listening socket), which runs for the sandbox's life. Two more arguments
# (a workspace and a tmp directory) are for tests on the host only.
#
# The supervisor keeps one kernel per language (the interpreter running the
# kernel's source, a process group of its own), started at that language's
# first run. Per run it sends the client what background processes wrote
# between runs, tells the kernel to run the main file, relays its output
# and at the kernel's "done <code>" answers the code. Frames to the client
# are "<o|e|d> <length>\n<bytes>": standard output, standard error, and
# done ("<code> <state>").
use strict;
use POSIX ();
use Socket;
use Fcntl;

my %KERNEL = (__KERNELS__);
my %INTERP = (__INTERPS__);
my %MAIN = (__MAINS__);
my $GRACE = __GRACE__;
my $KEEP = 65536;

my ($role, $lang, $soft, $first, $ws, $tmp) = @ARGV;
$ws = '/workspace' unless defined $ws;
$tmp = '/tmp' unless defined $tmp;
my $dir = "$tmp/.gatekeeper-session";
my $sock = "$dir/sock";

# now is a monotonic clock in seconds, to the clock tick (perl-base has no
# Time::HiRes).
my $tck = POSIX::sysconf(POSIX::_SC_CLK_TCK()) || 100;
sub now { (POSIX::times())[0] / $tck }

sub status_code { $_[0] & 127 ? 128 + ($_[0] & 127) : ($_[0] >> 8) & 255 }
sub how_ended {
  my ($st) = @_;
  return "was killed by signal " . ($st & 127) if $st & 127;
  return "exited with status " . (($st >> 8) & 255);
}

sub writeall {
  my ($fh, $s) = @_;
  while (length $s) {
    my $n = syswrite $fh, $s;
    if (!defined $n) { next if $! == POSIX::EINTR(); return 0 }
    substr($s, 0, $n) = '';
  }
  1;
}

#### client

my $reported = 0;
sub report {
  my ($code, $state) = @_;
  if (!$reported) {
    $reported = 1;
    my $st;
    open($st, '>&=', 4) and writeall($st, "$code $state\n");
  }
  POSIX::_exit(0);
}

sub client {
  $SIG{PIPE} = 'IGNORE';
  $lang =~ /^[a-z]+\z/ && exists $KERNEL{$lang} or do { syswrite STDERR, "gatekeeper: no kernel for language \"$lang\"\n"; report(125, 'l') };
  $soft =~ /^[0-9]+\z/ && $soft >= 1 or do { syswrite STDERR, "gatekeeper: bad timeout \"$soft\"\n"; report(125, 'l') };
  if ($first eq '1') {
    start_supervisor();
  }
  my $c;
  socket($c, PF_UNIX, SOCK_STREAM, 0) or do { syswrite STDERR, "gatekeeper: no socket: $!\n"; report(125, 'l') };
  connect($c, sockaddr_un($sock)) or do {
    syswrite STDERR, "gatekeeper: the session's supervisor is gone ($!): its interpreters and their state are lost\n";
    report(125, 'l');
  };
  writeall($c, "run $lang $soft\n") or do { syswrite STDERR, "gatekeeper: the session's supervisor is gone: its interpreters and their state are lost\n"; report(125, 'l') };
  my $buf = '';
  for (;;) {
    my $n = sysread $c, $buf, 65536, length $buf;
    if (!defined $n) { next if $! == POSIX::EINTR(); $n = 0 }
    if (!$n) {
      syswrite STDERR, "gatekeeper: the session's supervisor ended during the run: its interpreters and their state are lost\n";
      report(125, 'l');
    }
    while ($buf =~ /^([oed]) ([0-9]+)\n/) {
      my ($t, $len, $h) = ($1, $2, length($1) + length($2) + 2);
      last if length($buf) < $h + $len;
      my $data = substr($buf, $h, $len);
      substr($buf, 0, $h + $len) = '';
      if ($t eq 'd') {
        $data =~ /^([0-9]{1,3}) ([kitl])\z/ && $1 <= 255 or report(125, 'l');
        report($1, $2);
      }
      writeall($t eq 'o' ? \*STDOUT : \*STDERR, $data);
    }
    if (length($buf) > 64 && $buf !~ /^[oed] [0-9]{1,10}\n/) {
      syswrite STDERR, "gatekeeper: the session's supervisor sent a bad frame\n";
      report(125, 'l');
    }
  }
}

sub start_supervisor {
  mkdir $dir, 0700 or do { syswrite STDERR, "gatekeeper: cannot make $dir: $!\n"; report(125, 'l') };
  my $l;
  socket($l, PF_UNIX, SOCK_STREAM, 0) && bind($l, sockaddr_un($sock)) && listen($l, 8)
    or do { syswrite STDERR, "gatekeeper: cannot listen on $sock: $!\n"; report(125, 'l') };
  my $pid = fork;
  defined $pid or do { syswrite STDERR, "gatekeeper: cannot fork: $!\n"; report(125, 'l') };
  if ($pid) {
    close $l;
    waitpid $pid, 0;
    return;
  }
  POSIX::setsid();
  my $p2 = fork;
  POSIX::_exit(defined $p2 ? 0 : 1) if !defined $p2 || $p2;
  open STDIN, '<', '/dev/null';
  open STDOUT, '>', '/dev/null';
  open STDERR, '>', '/dev/null';
  my $keep = fileno $l;
  my @fds;
  if (opendir my $d, '/proc/self/fd') { @fds = grep { /^[0-9]+\z/ } readdir $d; closedir $d } else { @fds = 3 .. 1023 }
  POSIX::close($_) for grep { $_ > 2 && $_ != $keep } @fds;
  eval { supervise($l) };
  POSIX::_exit(0);
}

#### supervisor

my %k;           # language => kernel: pid, out, err, ctl, st, stbuf, ready, dead
my %bg = (o => { buf => '', dropped => 0 }, e => { buf => '', dropped => 0 });
my $lost;        # why the session's state is lost, once it is
my ($cur, $conn, $gone);    # the running language and its client; the client went away

sub nonblock {
  my ($fh) = @_;
  my $f = fcntl($fh, F_GETFL, 0);
  fcntl($fh, F_SETFL, $f | O_NONBLOCK);
}

sub keep_bg {
  my ($s, $data) = @_;
  my $b = $bg{$s};
  $b->{buf} .= $data;
  if (length $b->{buf} > $KEEP) {
    $b->{dropped} += length($b->{buf}) - $KEEP;
    substr($b->{buf}, 0, length($b->{buf}) - $KEEP) = '';
  }
}

sub send_frame {
  my ($t, $data) = @_;
  return if $gone || !$conn;
  writeall($conn, "$t " . length($data) . "\n" . $data) or $gone = 1;
}

# route: output a kernel wrote, to the run's client or kept for the next run.
sub route {
  my ($l, $s, $data) = @_;
  if (defined $cur && $cur eq $l && $conn && !$gone) { send_frame($s, $data) } else { keep_bg($s, $data) }
}

# drain reads what the kernel's pipes hold now, without waiting.
sub drain {
  my ($l) = @_;
  my $kn = $k{$l} or return;
  for my $s ('o', 'e') {
    my $fh = $kn->{$s eq 'o' ? 'out' : 'err'} or next;
    for (;;) {
      my $n = sysread $fh, my $data, 65536;
      if (!defined $n) { next if $! == POSIX::EINTR(); last }
      if (!$n) { delete $kn->{$s eq 'o' ? 'out' : 'err'}; last }
      route($l, $s, $data);
    }
  }
}

sub reap {
  for (;;) {
    my $pid = waitpid(-1, POSIX::WNOHANG());
    last if $pid <= 0;
    my $st = $?;
    for my $l (keys %k) {
      next unless $k{$l}{pid} == $pid && !defined $k{$l}{dead};
      $k{$l}{dead} = $st;
      close $k{$l}{ctl};
      unlink "$dir/$l.ctl", "$dir/$l.st";
      $lost = "the session's $l interpreter " . how_ended($st) . " between runs" if !defined $lost && !(defined $cur && $cur eq $l);
    }
  }
}

# pump waits up to $wait seconds for the kernels' output and the given
# handles; it routes what the kernels wrote, reaps ended kernels, and
# returns the given handles that are ready.
sub pump {
  my ($wait, @extra) = @_;
  my $rin = '';
  my %of;
  for my $l (keys %k) {
    for my $s ('out', 'err') {
      my $fh = $k{$l}{$s} or next;
      vec($rin, fileno $fh, 1) = 1;
      $of{fileno $fh} = [$l, $s eq 'out' ? 'o' : 'e', $s];
    }
  }
  vec($rin, fileno $_, 1) = 1 for @extra;
  my $n = select(my $rout = $rin, undef, undef, $wait);
  my @ready;
  if ($n > 0) {
    for my $fd (keys %of) {
      next unless vec($rout, $fd, 1);
      my ($l, $s, $key) = @{$of{$fd}};
      my $r = sysread $k{$l}{$key}, my $data, 65536;
      next if !defined $r;
      if (!$r) { delete $k{$l}{$key}; next }
      route($l, $s, $data);
    }
    @ready = grep { vec($rout, fileno $_, 1) } @extra;
  }
  reap();
  @ready;
}

sub start_kernel {
  my ($l) = @_;
  my ($ctl, $st) = ("$dir/$l.ctl", "$dir/$l.st");
  unlink $ctl, $st;
  POSIX::mkfifo($ctl, 0600) && POSIX::mkfifo($st, 0600) or return "cannot make the $l kernel's fifos: $!";
  my ($cw, $sr, $or, $ow, $er, $ew);
  sysopen($cw, $ctl, O_RDWR) && sysopen($sr, $st, O_RDWR | O_NONBLOCK) or return "cannot open the $l kernel's fifos: $!";
  pipe($or, $ow) && pipe($er, $ew) or return "no pipe: $!";
  my @argv = (@{$INTERP{$l}}, $KERNEL{$l});
  push @argv, 'gatekeeper-kernel' if $l eq 'sh';
  push @argv, $ctl, $st, "$ws/$MAIN{$l}";
  my $pid = fork;
  defined $pid or return "cannot fork: $!";
  if (!$pid) {
    setpgrp(0, 0);
    $SIG{$_} = 'DEFAULT' for qw(INT PIPE TERM QUIT HUP CHLD);
    chdir $ws;
    open STDIN, '<', '/dev/null';
    open STDOUT, '>&', $ow;
    open STDERR, '>&', $ew;
    exec { $argv[0] } @argv;
    syswrite STDERR, "gatekeeper: cannot start $argv[0]: $!\n";
    POSIX::_exit(127);
  }
  setpgrp($pid, $pid);
  close $ow;
  close $ew;
  nonblock($or);
  nonblock($er);
  $k{$l} = { pid => $pid, out => $or, err => $er, ctl => $cw, st => $sr, stbuf => '' };
  undef;
}

sub supervise {
  my ($l) = @_;
  $SIG{PIPE} = 'IGNORE';
  $SIG{INT} = 'IGNORE';
  for (;;) {
    my @r = pump(5, $l);
    next unless @r;
    accept(my $c, $l) or next;
    ($conn, $gone) = ($c, 0);
    eval { one_run() };
    ($cur, $conn) = (undef, undef);
    close $c;
  }
}

sub done {
  my ($code, $state) = @_;
  send_frame('d', "$code $state");
}

sub one_run {
  # the request: "run <lang> <soft>\n"
  my ($req, $until) = ('', now() + 5);
  while ($req !~ /\n/) {
    my @r = pump(0.2, $conn);
    return if now() > $until;
    next unless @r;
    my $n = sysread $conn, $req, 256, length $req;
    return if !$n || length $req > 200;
  }
  $req =~ /^run ([a-z]+) ([0-9]{1,9})\n\z/ && exists $KERNEL{$1} or return;
  my ($l, $secs) = ($1, $2);
  for my $s ('o', 'e') {
    my $b = $bg{$s};
    send_frame('e', "gatekeeper: background processes wrote $b->{dropped} bytes more on standard " . ($s eq 'o' ? 'output' : 'error') . " between runs than are kept; the last $KEEP follow\n") if $b->{dropped};
    send_frame($s, $b->{buf}) if length $b->{buf};
    ($b->{buf}, $b->{dropped}) = ('', 0);
  }
  if (defined $lost) {
    send_frame('e', "gatekeeper: $lost; the session's state is lost and this run's code did not run\n");
    return done(125, 'l');
  }
  if (!$k{$l} || defined $k{$l}{dead}) {
    my $err = start_kernel($l);
    if (defined $err) {
      $lost = "the $l interpreter could not start: $err";
      send_frame('e', "gatekeeper: $lost\n");
      return done(125, 'l');
    }
  }
  my $kn = $k{$l};
  $cur = $l;
  writeall($kn->{ctl}, "run\n");
  my ($deadline, $phase, $kill_at, $sent) = (now() + $secs, 'run', 0, 0);
  for (;;) {
    my $t = now();
    my $next = $phase eq 'run' ? $deadline : $kill_at;
    my $wait = $next - $t;
    $wait = 0.25 if $wait > 0.25;
    $wait = 0 if $wait < 0;
    my @r = pump($wait, $conn, $kn->{st});
    if ($gone || grep { $_ == $conn } @r) {
      my $n = sysread $conn, my $x, 64;
      if ($gone || (defined $n && !$n)) {
        kill 'KILL', -$kn->{pid};
        $lost = "the run's client ended during the run (the backstop killed it), and the $l interpreter with it";
        return;
      }
    }
    if (grep { $_ == $kn->{st} } @r) {
      sysread $kn->{st}, $kn->{stbuf}, 64, length $kn->{stbuf};
      while ($kn->{stbuf} =~ s/^([^\n]*)\n//) {
        my $line = $1;
        if ($line eq 'ready') {
          # The kernel handles the interrupt from now on: one due while it
          # started goes now.
          $kn->{ready} = 1;
          if ($phase eq 'int' && !$sent) {
            kill 'INT', -$kn->{pid};
            $sent = 1;
          }
        } elsif ($line =~ /^done ([0-9]{1,3})\z/) {
          my $code = $1 > 255 ? 255 : $1;
          $kn->{stbuf} = '';
          drain($l);
          return done($code, $phase eq 'run' ? 'k' : 'i');
        } else {
          $kn->{stbuf} = "bad\n" x 10;
          last;
        }
      }
      if (length $kn->{stbuf} > 32) {
        kill 'KILL', -$kn->{pid};
        $lost = "the $l kernel sent a bad status";
        send_frame('e', "gatekeeper: $lost\n");
        return done(125, 'l');
      }
    }
    if (defined $kn->{dead}) {
      drain($l);
      kill 'KILL', -$kn->{pid};
      $lost = "the session's $l interpreter " . how_ended($kn->{dead}) . " in an earlier run";
      return done(status_code($kn->{dead}), 'l');
    }
    $t = now();
    if ($phase eq 'run' && $t >= $deadline) {
      # A kernel still starting has no handler yet: it gets the interrupt
      # when it is ready, within the grace.
      if ($kn->{ready}) {
        kill 'INT', -$kn->{pid};
        $sent = 1;
      }
      ($phase, $kill_at) = ('int', $t + $GRACE);
    } elsif ($phase eq 'int' && $t >= $kill_at) {
      kill 'KILL', -$kn->{pid};
      waitpid $kn->{pid}, 0;
      $kn->{dead} = $?;
      drain($l);
      $lost = "the $l interpreter did not stop within ${GRACE}s of its interrupt at a run's timeout and was killed";
      return done(137, 't');
    }
  }
}

if ($role eq 'client') {
  client();
}
syswrite STDERR, "gatekeeper: unknown role\n";
report(125, 'l');

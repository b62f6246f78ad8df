package launch

import (
	"strconv"
	"strings"
)

// initBridge is init's side of the bridge (see Bridge), the sub bridge()
// that init (initProgram) runs instead of handing standard input to the
// launcher when the header names a line limit (a run with tools).
//
// Standard input, after the header, is a sequence of frames that only the
// runner writes (the program's standard input is /dev/null, and init,
// undumpable, keeps its own descriptors out of the program's reach):
// "f <n>\n" and n bytes, the wrapper files (toolsPack's format);
// "w <n>\n" and n bytes, a piece of the workspace tar, "w 0\n" ending it; then
// "a <call> <n>\n" and n bytes, the answer line to init's call <call>.
// init reads them itself, so nothing but init ever consumes standard input:
// the launcher's tar reads the workspace from a pipe init feeds (fd 7) and
// closes at "w 0", for GNU tar reads an archive on a pipe to its end, past
// the archive's own end blocks, and would otherwise swallow the answers.
//
// init uses perl's builtins alone: socket(2) with PF_UNIX and SOCK_STREAM
// (1, 1), fcntl(2) F_SETFL (4) with O_NONBLOCK (2048), the four-argument
// select. Those are Linux's numbers on amd64 and arm64, the only
// architectures init runs on (see prctl). Loading IO::Socket::UNIX and
// IO::Select instead cost every run with tools about 20 ms.
//
// init makes ToolsDir (0700), unpacks the wrapper files there itself (sub
// tools: files 0444, directories 0555, each path checked again against
// toolPath and created with O_CREAT|O_EXCL, 193 on amd64 and arm64, so
// nothing already there is followed or written through), listens on its
// bridge.sock, and only then lets the launcher unpack the workspace and
// start the program.
// It then serves the socket in one select loop until the launcher reports
// the program's exit (its status pipe, fd 3, becomes readable): it accepts
// at most maxBridgeConns connections at once, reads newline-ended request
// lines from each, and forwards every line as call frames on standard
// output (see callLead): "\x1egatekeeper-call <tag> <call> <c|e> <n>\n",
// n bytes of the line, "\n"; c when more of the line follows, e on its
// last piece. A frame ends in "\n", never in a byte that may start a mark:
// EndMarks, which sees the stream first, holds back such a tail until
// more output comes, and a frame held back would be a call not answered.
// Each frame is at most callFrameMax (4096, PIPE_BUF) bytes and written
// with one write(2), so the kernel puts it in the pipe whole,
// never interleaved with what the program writes to the same stream at
// the same time; the runner's CallDemux lifts the frames out of the
// stream wherever they fall between the program's bytes. The tag is the
// run's secret, so no byte the program prints can start a frame. A line
// longer than the header's limit is not buffered: init drops it up to its
// newline and sends an "x" frame carrying only the request's id (when the
// line starts with one), which the runner answers as a limit.
//
// Answers go to the connection the call came on; an answer to a
// connection that closed is dropped. Once the launcher has reported,
// init stops: it closes the socket and every connection without reading
// or forwarding another byte, and goes on as in a run without tools
// (kill, reap, end marks). A malformed frame on standard input, or its end,
// closes the bridge for the rest of the run (calls fail in the program).
var initBridge = `
sub frame {
  my $b = shift;
  if ($$b =~ /\A([fwa]) (?:([0-9]{1,15}) )?([0-9]{1,12})\n/) {
    my ($k, $id, $n, $l) = ($1, $2, $3, $+[0]);
    return () if length($$b) < $l + $n;
    my $p = substr($$b, $l, $n);
    substr($$b, 0, $l + $n) = '';
    return ($k, $id // 0, $p);
  }
  return () if length($$b) < 40 && index($$b, "\n") < 0;
  return ('!', 0, '');
}
sub tools {
  my ($dir, $p) = @_;
  my @dirs;
  while (length $p) {
    $p =~ s{\A([DF]) (?:([0-9]{1,12}) )?(` + strings.ReplaceAll(toolPath, "@", `\@`) + `)\n}{} && length($3) < 4096 or fail("bad tool files");
    my ($t, $n, $f) = ($1, $2, "$dir/$3");
    if ($t eq 'D') {
      defined $n and fail("bad tool files");
      mkdir $f, 0700 or fail("cannot make $f: $!");
      push @dirs, $f;
      next;
    }
    defined $n && length($p) >= $n or fail("bad tool files");
    sysopen(my $h, $f, 193, 0600) or fail("cannot write $f: $!");
    my $o = 0;
    while ($o < $n) {
      my $w = syswrite $h, $p, $n - $o, $o;
      defined $w or $! == 4 or fail("cannot write $f: $!");
      $o += $w if $w;
    }
    close $h or fail("cannot write $f: $!");
    chmod 0444, $f or fail("cannot make $f read-only: $!");
    substr($p, 0, $n) = '';
  }
  chmod 0555, $_ or fail("cannot make $_ read-only: $!") for reverse @dirs;
}
sub bridge {
  $SIG{PIPE} = sub {};
  my $dir = '` + ToolsDir + `';
  my $take = sub {
    for (;;) {
      my @f = frame(\$ib);
      return @f if @f;
      my $n = sysread STDIN, $ib, 65536, length $ib;
      next if !defined $n && $! == 4;
      $n or fail("the run's input ended early");
    }
  };
  mkdir $dir, 0700 or fail("cannot make $dir: $!");
  my ($k, $id, $p) = $take->();
  $k eq 'f' or fail("bad run input");
  tools($dir, $p);
  my $ls;
  socket($ls, 1, 1, 0) && bind($ls, pack('S Z*', 1, "$dir/bridge.sock")) && listen($ls, 64) && fcntl($ls, 4, 2048) or fail("cannot listen on $dir/bridge.sock: $!");
  my $lfd = fileno $ls;
  syswrite IW, $run;
  close IW;
  my $open = 1;
  for (;;) {
    ($k, $id, $p) = $take->();
    $k eq 'w' or fail("bad run input");
    last if $p eq '';
    while ($open && length $p) {
      my $n = syswrite WW, $p;
      if (defined $n) { substr($p, 0, $n) = '' } elsif ($! != 4) { $open = 0 }
    }
  }
  close WW;
  my ($lead, $room, $next, $on, %conn, %pend) = ("\x1egatekeeper-call $tag ", ` + strconv.Itoa(callPieceMax) + `, 0, 1);
  my %rd = ($lfd => $ls, 0 => \*STDIN, 3 => \*SR);
  my $wv = '';
  vec($wv, 1, 1) = 1;
  my $send = sub {
    for (;;) {
      my $n = syswrite STDOUT, $_[0];
      last if defined $n;
      if ($! == 11) { select(undef, my $w = $wv, undef, undef) } elsif ($! != 4) { last }
    }
  };
  my $drop = sub {
    my $c = shift;
    return if $c->{gone};
    delete $rd{$c->{n}};
    close $c->{s};
    $c->{gone} = 1;
    delete $conn{$c->{n}};
  };
  my $stop = sub {
    return if !$on;
    $on = 0;
    delete @rd{$lfd, 0};
    close $ls;
    $drop->($_) for values %conn;
  };
  my $call = sub {
    my ($c, $line) = @_;
    my ($cid, $off) = (++$next, 0);
    $pend{$cid} = $c;
    $c->{p}++;
    do {
      my $q = substr($line, $off, $room);
      $off += length $q;
      $send->(sprintf "%s%d %s %d\n%s\n", $lead, $cid, $off < length $line ? 'c' : 'e', length $q, $q);
    } while ($off < length $line);
  };
  my $over = sub {
    my ($c, $b) = @_;
    my $uid = $b =~ /\A\s*\{\s*"id"\s*:\s*([0-9]{1,15})\s*[,}]/ ? $1 : '';
    my $cid = ++$next;
    $pend{$cid} = $c;
    $c->{p}++;
    $send->(sprintf "%s%d x %d\n%s\n", $lead, $cid, length $uid, $uid);
  };
  LOOP: for (;;) {
    my %w = map { $_->{n} => $_->{s} } grep { length $_->{out} } values %conn;
    my ($rb, $wb) = ('', '');
    vec($rb, $_, 1) = 1 for keys %rd;
    vec($wb, $_, 1) = 1 for keys %w;
    select(my $r = $rb, my $w = (%w ? $wb : undef), undef, undef) > 0 or next;
    last if vec($r, 3, 1);
    for my $fd (sort { $a <=> $b } grep { vec($r, $_, 1) } keys %rd) {
      next if !$on;
      my $s = $rd{$fd} or next;
      if ($fd == $lfd) {
        accept(my $cs, $ls) or next;
        if (keys %conn >= ` + strconv.Itoa(maxBridgeConns) + `) { close $cs; next }
        fcntl($cs, 4, 2048) or do { close $cs; next };
        my $n = fileno $cs;
        $conn{$n} = {s => $cs, n => $n, in => '', out => '', p => 0};
        $rd{$n} = $cs;
      } elsif ($fd == 0) {
        my $n = sysread STDIN, $ib, 65536, length $ib;
        next if !defined $n && ($! == 4 || $! == 11);
        if (!$n) { $stop->(); next }
        while (my ($k, $cid, $p) = frame(\$ib)) {
          if ($k ne 'a') { $stop->(); last }
          my $c = delete $pend{$cid} or next;
          $c->{p}--;
          $c->{out} .= "$p\n" if !$c->{gone};
        }
      } elsif (my $c = $conn{$fd}) {
        my $n = sysread $s, $c->{in}, 65536, length $c->{in};
        next if !defined $n && ($! == 4 || $! == 11);
        if (!$n) {
          delete $rd{$fd};
          $c->{eof} = 1;
          $drop->($c) if !$c->{p} && !length $c->{out};
          next;
        }
        for (;;) {
          my $i = index $c->{in}, "\n";
          if ($c->{skip}) {
            if ($i < 0) { $c->{in} = ''; last }
            substr($c->{in}, 0, $i + 1) = '';
            $c->{skip} = 0;
            next;
          }
          if ($i < 0) {
            if (length $c->{in} > $max) { $over->($c, $c->{in}); $c->{in} = ''; $c->{skip} = 1 }
            last;
          }
          my $line = substr $c->{in}, 0, $i;
          substr($c->{in}, 0, $i + 1) = '';
          if (length $line > $max) { $over->($c, $line) } else { $call->($c, $line) }
        }
      }
    }
    for my $fd (grep { vec($w, $_, 1) } keys %w) {
      my ($s, $c) = ($w{$fd}, $conn{$fd});
      next if !$c || $c->{s} != $s;
      my $n = syswrite $s, $c->{out};
      if (defined $n) { substr($c->{out}, 0, $n) = '' } elsif ($! != 4 && $! != 11) { $drop->($c); next }
      $drop->($c) if $c->{eof} && !$c->{p} && !length $c->{out};
    }
  }
  $stop->();
}`

// maxBridgeConns bounds the connections init serves at once; one more is
// closed as soon as it is accepted.
const maxBridgeConns = 64

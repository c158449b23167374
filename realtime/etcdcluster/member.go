package etcdcluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/leasefence/lab/leasefence/etcdlease/etcdembed"
)

// MemberCommand is the hidden subcommand a cluster re-executes its own
// binary with to run one member: `<binary> MemberCommand <config JSON>`.
// A program that starts clusters calls ServeMemberIfAsked first thing in
// main (and a test binary in TestMain).
const MemberCommand = "__etcd-member"

// started is the member process's first line on its standard output:
// where its listeners are, and its id in the cluster.
type started struct {
	Client string `json:"client"`
	Peer   string `json:"peer"`
	ID     string `json:"id"`
	Err    string `json:"err,omitempty"`
}

// ServeMemberIfAsked runs a member and exits, when the process was started
// as one (its first argument is MemberCommand); otherwise it returns at
// once.
func ServeMemberIfAsked() {
	if len(os.Args) < 3 || os.Args[1] != MemberCommand {
		return
	}
	os.Exit(serveMember(os.Args[2], os.Stdin, os.Stdout))
}

// serveMember runs the member configured by cfg until its parent goes:
// its standard input ends (the parent closed it or died), or SIGTERM.
func serveMember(cfg string, stdin io.Reader, stdout io.Writer) int {
	var c etcdembed.MemberConfig
	out := json.NewEncoder(stdout)
	if err := json.Unmarshal([]byte(cfg), &c); err != nil {
		out.Encode(started{Err: "bad member config: " + err.Error()})
		return 2
	}
	s, err := etcdembed.StartConfigured(c)
	if err != nil {
		out.Encode(started{Err: err.Error()})
		return 1
	}
	defer s.Close()
	out.Encode(started{Client: s.ClientAddr, Peer: s.PeerAddr, ID: s.ID()})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	parentGone := make(chan struct{})
	go func() {
		io.Copy(io.Discard, bufio.NewReader(stdin))
		close(parentGone)
	}()
	select {
	case <-ctx.Done():
	case <-parentGone:
	case err := <-s.Err():
		fmt.Fprintln(os.Stderr, "etcd member:", err)
		return 1
	}
	return 0
}

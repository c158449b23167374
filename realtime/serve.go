package realtime

import "sync"

// An adapter whose servers run as processes of the running binary (etcd's
// members, the binary re-executed) registers what serves one, so that a
// program that links it serves them knowing no adapter: it calls
// ServeIfAsked first thing in main.

var servers struct {
	sync.Mutex
	serve []func()
}

// RegisterServer registers serve, which runs a server and exits when the
// process was started as one, and returns at once otherwise. An adapter
// calls it from an init function.
func RegisterServer(serve func()) {
	servers.Lock()
	defer servers.Unlock()
	servers.serve = append(servers.serve, serve)
}

// ServeIfAsked runs the server this process was started as, and exits;
// it returns at once in a process started as nothing of the kind.
func ServeIfAsked() {
	servers.Lock()
	serve := servers.serve
	servers.Unlock()
	for _, f := range serve {
		f()
	}
}

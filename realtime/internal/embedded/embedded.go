// Package embedded starts the embedded etcd that a library's contender
// runs on by itself (etcd's Mutex, client-go's leader election).
package embedded

import (
	"errors"
	"fmt"
	"os"

	"github.com/leasefence/lab/internal/scratch"
	"github.com/leasefence/lab/leasefence/etcdlease/etcdembed"
	"github.com/leasefence/lab/realtime"
)

// Contender starts an embedded etcd under dir ("" for the system's
// temporary directory), in a directory marked as this process's (a run
// killed before it closes leaves nothing the next run does not remove),
// and returns the contender name that attach makes on its client URL.
// Closing the contender closes what attach opened, then stops the etcd
// and removes its directory.
func Contender(dir, name string, attach func(endpoint string) (*realtime.Contender, error)) (*realtime.Contender, error) {
	tmp, err := scratch.MkdirTemp(dir, "leasefence-"+name+"-")
	if err != nil {
		return nil, err
	}
	member, err := etcdembed.StartMember(tmp)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("%s: embedded etcd: %w", name, err)
	}
	c, err := attach(member.Endpoint())
	if err != nil {
		member.Stop()
		os.RemoveAll(tmp)
		return nil, err
	}
	closeAttached := c.OnClose
	c.OnClose = func() error {
		var err error
		if closeAttached != nil {
			err = closeAttached()
		}
		member.Stop()
		return errors.Join(err, os.RemoveAll(tmp))
	}
	return c, nil
}

package sqllease_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leasefence/lab/leasefence"
	"github.com/leasefence/lab/leasefence/leasetest"
	"github.com/leasefence/lab/leasefence/sqllease"
)

func TestLockDelayOption(t *testing.T) {
	db := stubDB(t)
	leasetest.TestLockDelayOption(t, "Options.LockDelay", func(delay time.Duration, allowLong bool) error {
		_, err := sqllease.New(db, sqllease.Options{TTL: time.Second, Dialect: sqllease.Postgres, LockDelay: delay, AllowLongLockDelay: allowLong})
		return err
	})
	_, err := sqllease.New(db, sqllease.Options{TTL: time.Second, Dialect: sqllease.Postgres, LockDelay: 1500 * time.Nanosecond})
	if !errors.Is(err, leasefence.ErrInvalidRequest) || !strings.Contains(err.Error(), "Options.LockDelay must be whole microseconds") {
		t.Errorf("New with a lock-delay of 1.5µs = %v, want ErrInvalidRequest saying it must be whole microseconds", err)
	}
}

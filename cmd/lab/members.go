package main

import (
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/report"
)

// memberFaults are the run's etcd member faults, as the report says them.
func memberFaults(res *realtime.Result) []report.MemberFault {
	var out []report.MemberFault
	for _, f := range res.MemberFaults {
		out = append(out, report.MemberFault{AtMS: f.At.Milliseconds(), Fault: string(f.Kind), Member: f.Member, Leader: f.Leader,
			DurationMS: f.Duration.Milliseconds(), DelayMS: f.Delay.Milliseconds(), Error: f.Error})
	}
	return out
}

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

// primaryFaults are the run's faults of the Redis primary, as the report
// says them.
func primaryFaults(res *realtime.Result) []report.PrimaryFault {
	var out []report.PrimaryFault
	for _, f := range res.PrimaryFaults {
		out = append(out, report.PrimaryFault{AtMS: f.At.Milliseconds(), Fault: string(f.Kind), Victim: f.Victim,
			DurationMS: f.Duration.Milliseconds(), Promoted: f.Promoted, AfterMS: f.After.Milliseconds(), Error: f.Error})
	}
	return out
}

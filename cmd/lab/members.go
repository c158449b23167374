package main

import (
	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/realtime"
	"github.com/leasefence/lab/report"
)

// memberFaults are the run's etcd member faults, as the report says them.
func memberFaults(res *realtime.Result) []report.MemberFault {
	var out []report.MemberFault
	for _, f := range res.MemberFaults {
		rf := report.MemberFault{AtMS: f.At.Milliseconds(), Fault: "pause", Member: f.Member, Leader: f.Leader,
			DurationMS: f.Duration.Milliseconds(), Error: f.Error}
		if f.Kind == history.PartitionMember {
			rf.Fault = "partition"
			if f.Value > 0 {
				rf.Fault, rf.DelayMS = "delay", int64(f.Value*1000)
			}
		}
		out = append(out, rf)
	}
	return out
}

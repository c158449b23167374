package harness

import (
	"github.com/leasefence/lab/leasefence"
)

// What is only for display: the state a dashboard shows for each agent,
// the lanes of recent states and writes, and the newest refusals. The
// engine calls setState and the lane marks as it goes; none of it decides
// anything the run does. Whether a lease has lapsed at the coordinator is
// read from the history, through the checker's reader.

// displayState is the agent's state as a dashboard shows it.
func (a *actor) displayState(s *Sim) AgentState {
	switch {
	case a.ag.Acquiring():
		return AgentWaiting
	case a.ag.Acting():
		if g := s.checker.Reader().Holding(a.idx); g >= 0 && s.checker.Reader().Generation(g).Lapsed() {
			return AgentZombie
		}
		if a.ag.Stalled(s.now) {
			return AgentStalled
		}
		return AgentHolding
	}
	if a.ag.Denied() {
		return AgentWaiting
	}
	return AgentIdle
}

func (s *Sim) setState(a *actor, st AgentState) {
	res := int32(-1)
	if st != AgentIdle {
		res = int32(a.ag.Resource())
	}
	if a.state != st || a.laneRes != res {
		a.state, a.laneRes = st, res
		a.lane.push(Segment{From: s.now, State: st, Resource: res})
	}
}

const laneSegments, laneMarks = 64, 32

// laneRing keeps an agent's recent states and writes for the timeline.
type laneRing struct {
	segs  [laneSegments]Segment
	nseg  int
	marks [laneMarks]Mark
	nmark int
}

func (l *laneRing) push(seg Segment) {
	l.segs[l.nseg%laneSegments] = seg
	l.nseg++
}

func (l *laneRing) mark(m Mark) {
	l.marks[l.nmark%laneMarks] = m
	l.nmark++
}

// noteRefusal keeps the newest MaxSnapshotRefusals refusals for snapshots.
func (s *Sim) noteRefusal(r leasefence.Rejection) {
	if len(s.refusals) == 2*MaxSnapshotRefusals {
		s.refusals = append(s.refusals[:0], s.refusals[MaxSnapshotRefusals:]...)
	}
	s.refusals = append(s.refusals, RefusalView{At: s.now, Rejection: r})
}

package harness

import (
	"fmt"

	"github.com/leasefence/lab/history"
	"github.com/leasefence/lab/spec"
)

// Intervene applies iv now (its At is set to the current virtual instant)
// and records it, so the run can be replayed with Interventions.
func (s *Sim) Intervene(iv history.Intervention) error {
	iv.At = s.now
	if err := s.sc.CheckIntervention(iv); err != nil {
		return fmt.Errorf("%w: intervention: %v", spec.ErrInvalidScenario, err)
	}
	s.sc.Interventions = append(s.sc.Interventions, iv)
	s.apply(iv)
	return nil
}

// Interventions returns the interventions applied so far, replayed or live.
func (s *Sim) Interventions() []history.Intervention {
	return append([]history.Intervention(nil), s.sc.Interventions...)
}

// Scenario returns the scenario being run, with the live interventions
// recorded so far: running it again replays this run.
func (s *Sim) Scenario() spec.Scenario {
	sc := s.sc
	sc.Interventions = s.Interventions()
	return sc
}

func (s *Sim) apply(iv history.Intervention) {
	ivc := iv
	agentIdx := -1
	if iv.Agent != "" {
		agentIdx = s.agentIndexOf(iv.Agent)
	}
	s.emit(history.Event{Kind: history.Intervened, Agent: agentIdx, Resource: -1, Other: -1, Intervention: &ivc})
	switch iv.Kind {
	case history.StallAgent:
		a := &s.agents[agentIdx]
		s.drive(a, a.ag.Stall(s.now, iv.Duration))
	case history.SetDropRate:
		s.dropRequests, s.dropReplies = iv.Value, iv.Value
		lossy := s.mayLose()
		for i := range s.agents {
			a := &s.agents[i]
			s.drive(a, a.ag.SetLossy(s.now, lossy))
		}
	case history.RestartCoordinator:
		s.restart(iv.Persist)
	case history.TogglePush:
		s.push = !s.push
	}
}

// script hands a scripted action to its agent.
func (s *Sim) script(act spec.Action) {
	i, _ := s.sc.AgentIndex(act.Agent)
	a := &s.agents[i]
	s.drive(a, a.ag.Script(s.now, act))
}

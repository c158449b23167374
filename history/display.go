package history

// AgentState is what an agent is doing, as a dashboard shows it.
type AgentState uint8

// The agent states. Each has a word and a one-letter glyph, so no state is
// shown by colour alone.
const (
	AgentIdle    AgentState = iota // thinking between attempts
	AgentWaiting                   // an acquire is in flight or was denied
	AgentHolding                   // holds a lease it believes valid
	AgentStalled                   // stalled between its check and its write
	AgentZombie                    // believes its lease valid, but the coordinator has expired it
	numAgentStates
)

var agentStateNames = [numAgentStates]string{"idle", "waiting", "holding", "stalled", "believes-expired"}
var agentStateGlyphs = [numAgentStates]byte{'.', '?', '#', '~', '!'}

func (s AgentState) String() string {
	if s < numAgentStates {
		return agentStateNames[s]
	}
	return "unknown"
}

// Glyph is the state's one-character mark for timelines: . idle, ? waiting,
// # holding, ~ stalled, ! believes-expired.
func (s AgentState) Glyph() byte {
	if s < numAgentStates {
		return agentStateGlyphs[s]
	}
	return ' '
}

// MarkKind is what happened to a write.
type MarkKind uint8

// The kinds of write mark.
const (
	MarkAdmitted MarkKind = iota
	MarkRefused
	MarkStale // landed after a write of a newer lease generation
)

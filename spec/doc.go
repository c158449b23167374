// Package spec is the scenario model: what a run is to be, independent of
// the runner that performs it. A Scenario names the agents and resources,
// their behaviour (Dist, Behaviour), the network and its faults (Network),
// clocks, partitions, coordinator restarts, the gate push, scripted Actions
// and live Interventions. Validate refuses every scenario out of range, and
// Header gives the history header the checker judges a run under.
//
// Both runners (the simulator in package harness and the real-time runner
// in package realtime) and the scenario files (package scenario) read it;
// it imports only leasefence and history, so that neither runner depends on
// the other.
package spec

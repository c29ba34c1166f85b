package deploy_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestAgent renders the optional components: deploy/agent and the agent
// with the MPS component (deploy/overlays/agent-mps), deploy/dra and
// deploy/scheduler decode strictly, and the chart with agent.enabled,
// dra.enabled or scheduler.enabled renders the same objects (labels aside)
// beside an unchanged webhook; without it, none of them. deploy/agent's own
// tests check what the objects say (rights, nodes, MPS).
func TestAgent(t *testing.T) {
	tl := findTools(t)
	webhook := tl.template(t)
	tests := map[string]struct {
		args []string
		like string
	}{
		"the agent is deploy/agent": {args: []string{"--set", "agent.enabled=true"}, like: "agent"},
		"the agent with MPS is deploy/overlays/agent-mps": {
			args: []string{"--set", "agent.enabled=true", "--set", "agent.mps.enabled=true"}, like: "overlays/agent-mps"},
		"the DRA driver is deploy/dra":           {args: []string{"--set", "dra.enabled=true"}, like: "dra"},
		"gpuadmit-scheduler is deploy/scheduler": {args: []string{"--set", "scheduler.enabled=true"}, like: "scheduler"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			want := tl.build(t, tc.like)
			got := tl.template(t, tc.args...)
			agent, rest := objects{}, objects{}
			for k, o := range got {
				if _, ok := want[k]; ok {
					agent[k] = o
				} else {
					rest[k] = o
				}
			}
			for k := range want {
				if _, ok := webhook[k]; ok {
					t.Errorf("%s is rendered without agent.enabled", k)
				}
			}
			// The agent's grants are deploy/agent's (its own tests hold them
			// to its Node); the webhook's are checked without them.
			checkCommon(t, rest, "")
			equalExceptLabels(t, want, agent)
			if diff := cmp.Diff(len(webhook)+len(want), len(got)); diff != "" {
				t.Errorf("the chart renders %v; want the webhook's objects and the agent's, nothing else", got.keys())
			}
		})
	}
}

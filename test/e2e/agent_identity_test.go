package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The agent's identity: its ServiceAccount in deploy/agent, and the node
// name a projected service-account token carries (the API server puts it in
// the user's extra as authentication.kubernetes.io/node-name; impersonation
// sets the same).
const agentUser = "system:serviceaccount:gpuadmit-agent:gpuadmit-agent"

// agentClient installs deploy/agent's namespace, ServiceAccount, RBAC and
// own-node policy, and returns a client that acts as the agent on node.
func agentClient(t *testing.T, ctx context.Context, node string) client.Client {
	t.Helper()
	for _, f := range []string{"namespace.yaml", "serviceaccount.yaml", "rbac.yaml", "own-node-policy.yaml"} {
		if err := env.Apply(ctx, filepath.Join(root, "deploy/agent", f)); err != nil {
			t.Fatalf("apply deploy/agent/%s: %v", f, err)
		}
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: agentUser,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:gpuadmit-agent", "system:authenticated"},
		Extra:    map[string][]string{"authentication.kubernetes.io/node-name": {node}},
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAgentMayChangeOnlyItsOwnNode: with deploy/agent's RBAC the agent may
// patch Nodes, and its own-node ValidatingAdmissionPolicy keeps it to the
// node its token names.
func TestAgentMayChangeOnlyItsOwnNode(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"agent-own-0", "agent-other-0"} {
		n := &corev1.Node{}
		n.Name = name
		if err := env.AddNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		defer env.Client.Delete(context.Background(), n)
	}
	c := agentClient(t, ctx, "agent-own-0")
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"gpuadmit.io/gpus":"[]"}}}`))
	waitFor(t, "the own-node policy refuses another node", 30*time.Second, func() (bool, string) {
		other := &corev1.Node{}
		other.Name = "agent-other-0"
		err := c.Patch(ctx, other, patch)
		return err != nil && strings.Contains(err.Error(), "only the Node it runs on"), "patch of another node: " + errString(err)
	})
	own := &corev1.Node{}
	own.Name = "agent-own-0"
	if err := c.Patch(ctx, own, patch); err != nil {
		t.Errorf("the agent may not patch its own node: %v", err)
	}
	if err := c.Delete(ctx, own); err == nil {
		t.Error("the agent deleted a Node; its RBAC grants get and patch only")
	}
}

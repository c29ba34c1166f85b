package webhook

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Role is which of gpuadmit's parts a process runs. The parts need different
// powers, so a deployment runs them as separate Deployments with separate
// ServiceAccounts: the serving replicas only read (and record Events), the
// reconcilers write only the objects gpuadmit owns.
type Role string

const (
	// RoleAll serves the webhook and runs the reconcilers in one process, as
	// before the split: for a development run with one's own kubeconfig. It
	// needs the powers of both ServiceAccounts.
	RoleAll Role = "all"
	// RoleWebhook serves admission reviews only: no reconciler, no leader
	// election, no writes but Events.
	RoleWebhook Role = "webhook"
	// RoleController runs the reconcilers only (quota, share claim
	// templates, gpuadmit-scheduler's handover), leader-elected when Options.LeaderElection is set, and
	// serves no admission reviews.
	RoleController Role = "controller"
)

// Roles are the values ParseRole accepts.
var Roles = []Role{RoleAll, RoleWebhook, RoleController}

// ParseRole reads a --role value; empty is RoleAll.
func ParseRole(s string) (Role, error) {
	if s == "" {
		return RoleAll, nil
	}
	for _, r := range Roles {
		if string(r) == s {
			return r, nil
		}
	}
	names := make([]string, len(Roles))
	for i, r := range Roles {
		names[i] = string(r)
	}
	return "", fmt.Errorf("role %q: want one of %s", s, strings.Join(names, ", "))
}

// serves reports whether r serves admission reviews.
func (r Role) serves() bool { return r == RoleAll || r == RoleWebhook }

// reconciles reports whether r runs the reconcilers.
func (r Role) reconciles() bool { return r == RoleAll || r == RoleController }

// leaderElects reports whether the manager elects a leader: only a role that
// reconciles does; a serving-only replica would wait for a Lease it has no
// right to and no reconciler needs.
func (o Options) leaderElects() bool { return o.LeaderElection && o.Role.reconciles() }

// servesDRA reports whether the cluster serves resource.k8s.io/v1
// ResourceClaimTemplates (Kubernetes 1.34 and later): share claims exist only
// there. It asks discovery, not the ResourceSlice informer, so a controller
// needs no right to read slices.
func servesDRA(mgr manager.Manager) (bool, error) {
	_, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: "resource.k8s.io", Kind: "ResourceClaimTemplate"}, "v1")
	switch {
	case meta.IsNoMatchError(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("discover resource.k8s.io/v1: %w", err)
	}
	return true, nil
}

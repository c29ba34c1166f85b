package policy

import (
	authenticationv1 "k8s.io/api/authentication/v1"

	"github.com/gpuadmit/gpuadmit/pkg/intent"
)

// Input is the document a policy sees as `input`; the policy answers with
// data.gpuadmit.decision (Decision).
type Input struct {
	// Operation is the admission operation, "CREATE".
	Operation string `json:"operation"`
	// UserInfo is who is creating the pod.
	UserInfo authenticationv1.UserInfo `json:"userInfo"`
	// Namespace is the pod's namespace with its labels and annotations.
	Namespace Namespace `json:"namespace"`
	// Pod is the pod as it arrived, as a policy sees it (View).
	Pod *PodView `json:"pod"`
	// Containers are the normalized GPU requests, one per GPU container.
	Containers []intent.Request `json:"containers"`
	// Hints are the pod-level hints (class, backend, model).
	Hints Hints `json:"hints"`
	// Pools are the inventory's GPU pools (inventory.Pool values), or the
	// same converted once with PreparePools, which saves their conversion.
	Pools any `json:"pools"`
	// Quota is the namespace's quota declarations and usage, where known.
	Quota any `json:"quota"`
	// Cluster is what the webhook sees of the cluster besides its pools.
	Cluster Cluster `json:"cluster"`
	// Now is input.now, the time of the admission in nanoseconds since the
	// Unix epoch, truncated to the set's declared granularity (Set.Now):
	// policies may not call time.now_ns(). Absent for a set that does not
	// read it. Evaluate fills it from the engine's clock when zero, and
	// truncates what a caller gives.
	Now int64 `json:"now,omitempty"`
}

// Cluster is input.cluster.
type Cluster struct {
	// Schedulers are the second schedulers running now (gpuadmit-scheduler
	// while its leader renews its Lease); never null. The default policy
	// gives every pool to gpuadmit-scheduler while it runs.
	Schedulers []string `json:"schedulers"`
	// Owners says, pool by pool, whether gpuadmit-scheduler may own the
	// pool now, as gpuadmit's controller records it (pkg/handover):
	// "gpuadmit-scheduler" where it may; "default-scheduler" where it may
	// not; "releasing" while the pods that waited for a gpuadmit-scheduler
	// that is gone are replaced. The policy gives gpuadmit-scheduler a pool
	// only where this says "gpuadmit-scheduler". Never null.
	Owners map[string]string `json:"owners"`
}

// Namespace is the part of a Namespace a policy reads.
type Namespace struct {
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// Hints are a pod's gpuadmit.io/class, gpuadmit.io/backend and
// gpuadmit.io/model, and the GPU types HAMi's nvidia.com/use-gputype and
// nouse-gputype name (never null: empty when unset).
type Hints struct {
	Class      string   `json:"class"`
	Backend    string   `json:"backend"`
	Model      string   `json:"model"`
	UseTypes   []string `json:"useTypes"`
	AvoidTypes []string `json:"avoidTypes"`
}

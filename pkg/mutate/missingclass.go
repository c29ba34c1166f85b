package mutate

import (
	"context"
	"fmt"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gpuadmit/gpuadmit/pkg/intent"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/write"
	"github.com/gpuadmit/gpuadmit/pkg/policy"
)

// missingPriorityClass is the denial of a decision that names a
// PriorityClass the cluster lacks, and empty when the class exists, when the
// decision names none, or when classes cannot be read (the offline CLI, a
// failed read: the API server's Priority plugin then checks the name itself).
//
// The API server refuses such a pod anyway, after gpuadmit has admitted it,
// with a message that does not say where the name came from; a warning
// instead of a denial would only precede that refusal, so there is no policy
// switch for it.
func (m *Mutator) missingPriorityClass(ctx context.Context, d policy.Decision, want intent.Pod) string {
	name := d.PriorityClassName
	if m.opts.PriorityClasses == nil || name == "" {
		return ""
	}
	_, found, err := m.opts.PriorityClasses.PriorityClass(ctx, name)
	if err != nil {
		logf.FromContext(ctx).Error(err, "PriorityClass not checked; the API server checks it", "priorityClass", name)
		return ""
	}
	if found {
		return ""
	}
	return fmt.Sprintf("policy revision %s gives this pod (class %s) PriorityClass %q, which does not exist in the cluster: "+
		"create it (kubectl create priorityclass %s --value=<priority>), or map the class to one that exists "+
		"(the namespace label gpuadmit.io/priority.<class>=<PriorityClass>, or the policy's priority classes)",
		d.Revision, write.ClassOf(want), name, name)
}

package perf

import (
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuadmit/gpuadmit/pkg/allocator"
	"github.com/gpuadmit/gpuadmit/pkg/claim"
	"github.com/gpuadmit/gpuadmit/pkg/inventory"
)

// schedulerName stands for the harness's {{.SchedulerName}}, a template
// parameter of the createPods operations: the profile the pods ask for.
const schedulerName = "@SCHEDULER@"

// container is the name of the pods' one container.
const container = "main"

// podKind is one kind of GPU pod of the workload, as gpuadmit's webhook
// writes it on DRA pools: either a share pinned to one pool (a claim from
// gpuadmit's template of its size, the pool's nodeSelector, and the
// accounting requests of its MiB and model), or, where the policy accepts
// several DRA pools, a claim from an alternatives template that lists
// them in the policy's order (firstAvailable), pinned to no pool and
// charged its largest alternative.
type podKind struct {
	name string
	// weight is how many of each ten pods are of this kind.
	weight      int
	cpu, memory string
	// shareMiB, pool and model are a share pinned to one pool.
	shareMiB    int64
	pool, model string
	// alts are the alternatives, in order; chargeMiB what quotas charge.
	alts      []claim.Alternative
	chargeMiB int64
}

var podKinds = []podKind{
	{name: "share-10g", weight: 4, cpu: "2", memory: "16Gi", shareMiB: 10240, pool: "h100", model: "H100-80GB"},
	{name: "share-20g", weight: 2, cpu: "4", memory: "32Gi", shareMiB: 20480, pool: "h200", model: "H200-141GB"},
	// 9 GiB: a MIG 1g.10gb slice (9984 MiB) of an H100, else a share of
	// an H100, else a share of an H200: a MIG slice, else a share, the
	// fallback chain of gpuadmit's default policies.
	{name: "alt-9g", weight: 3, cpu: "2", memory: "16Gi", chargeMiB: 9984, alts: []claim.Alternative{
		{Backend: claim.BackendMIG, Model: "H100-80GB", Profile: "1g.10gb", Count: 1},
		{Backend: claim.BackendShared, Model: "H100-80GB", MiB: 9216},
		{Backend: claim.BackendShared, Model: "H200-141GB", MiB: 9216},
	}},
	// One whole GPU of either model, H100 first.
	{name: "whole-1", weight: 1, cpu: "16", memory: "128Gi", chargeMiB: 143771, alts: []claim.Alternative{
		{Backend: claim.BackendWhole, Model: "H100-80GB", Count: 1},
		{Backend: claim.BackendWhole, Model: "H200-141GB", Count: 1},
	}},
}

// template is the kind's ResourceClaimTemplate in the harness's
// namespace (the createAny operation sets it).
func (k podKind) template() *resourceapi.ResourceClaimTemplate {
	var t *resourceapi.ResourceClaimTemplate
	if len(k.alts) > 0 {
		t = claim.AlternativesTemplate("", k.alts)
	} else {
		t = claim.Template("", k.shareMiB)
	}
	t.TypeMeta = metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceClaimTemplate"}
	return t
}

// pod is the kind's pod as the webhook leaves it.
func (k podKind) pod() *corev1.Pod {
	t := k.template()
	claimName := claim.PodClaimPrefix + container
	acct := corev1.ResourceList{}
	p := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "gpuadmit-" + k.name + "-",
			Labels:       map[string]string{claim.LabelShare: "true", "gpuadmit.io/kind": k.name},
		},
		Spec: corev1.PodSpec{
			SchedulerName:  schedulerName,
			ResourceClaims: []corev1.PodResourceClaim{{Name: claimName, ResourceClaimTemplateName: ptr.To(t.Name)}},
		},
	}
	if len(k.alts) > 0 {
		acct[allocator.ResourceMemoryMiB] = *resource.NewQuantity(k.chargeMiB, resource.DecimalSI)
		p.Annotations = map[string]string{claim.AnnotationAlternatives: claim.EncodeAlternatives(map[string][]claim.Alternative{t.Name: k.alts})}
	} else {
		acct[allocator.ResourceMemoryMiB] = *resource.NewQuantity(k.shareMiB, resource.DecimalSI)
		acct[corev1.ResourceName(allocator.AccountingResource(k.model))] = *resource.NewQuantity(k.shareMiB, resource.DecimalSI)
		p.Spec.NodeSelector = map[string]string{inventory.LabelPool: k.pool}
	}
	req := acct.DeepCopy()
	req[corev1.ResourceCPU] = resource.MustParse(k.cpu)
	req[corev1.ResourceMemory] = resource.MustParse(k.memory)
	p.Spec.Containers = []corev1.Container{{
		Name:  container,
		Image: "registry.k8s.io/pause:3.10.1",
		Resources: corev1.ResourceRequirements{
			Requests: req, Limits: acct,
			Claims: []corev1.ResourceClaim{{Name: claimName}},
		},
	}}
	return p
}

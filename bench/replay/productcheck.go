package replay

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpuadmit/gpuadmit/bench/packing"
	"github.com/gpuadmit/gpuadmit/pkg/claim"
	"github.com/gpuadmit/gpuadmit/pkg/mutate"
	"github.com/gpuadmit/gpuadmit/pkg/mutate/record"
)

// ProductCheck is how gpuadmit's webhook wrote the GPU pods of a
// product-path replay, counted from the pods the API server holds.
type ProductCheck struct {
	// Admitted GPU pods carry gpuadmit's decision record and label.
	Admitted int `json:"admitted"`
	// Alternatives of them have a claim from an alternatives template
	// (gpuadmit-alt-…): the scheduler chose the pool.
	Alternatives int `json:"alternatives"`
	// OnePool of them were placed on one pool (a share template, or whole
	// GPUs as nvidia.com/gpu served by gpuadmit's DeviceClass).
	OnePool int `json:"onePool"`
	// Denied GPU pods were refused by the webhook, so never created (a
	// model hint naming a model none of the replayed nodes has); they
	// count as unplaced.
	Denied int `json:"denied"`
	// Templates is the number of distinct claim templates the pods name.
	Templates int `json:"templates"`
	// WebhookRetries are pod creates tried again because the webhook
	// failed (an internal error, not a decision), as a controller retries.
	WebhookRetries int `json:"webhookRetries"`
}

// checkProduct checks that every GPU pod of the workload the API server
// holds went through gpuadmit's webhook, so that a product-path figure can
// never come from pods the bench wrote itself: each carries gpuadmit's
// decision record and managed label, asks for no gpuadmit.io/gpu any more
// (the webhook rewrites it), gets its GPU only from gpuadmit's claim
// templates or nvidia.com/gpu, and names scheduler. With alternatives, at
// least one pod must have a claim of alternatives; without, none may.
func checkProduct(pods []packing.Pod, objs []corev1.Pod, scheduler string, alternatives bool) (ProductCheck, error) {
	var c ProductCheck
	templates := map[string]bool{}
	for i := range objs {
		o := &objs[i]
		j := podIndex(o.Name)
		if j < 0 || j >= len(pods) || pods[j].GPUs == 0 {
			continue
		}
		alt, err := checkProductPod(o, scheduler, templates)
		if err != nil {
			return c, fmt.Errorf("pod %s: %w", o.Name, err)
		}
		c.Admitted++
		if alt {
			c.Alternatives++
		} else {
			c.OnePool++
		}
	}
	c.Templates = len(templates)
	switch {
	case alternatives && c.Alternatives == 0:
		return c, fmt.Errorf("none of %d GPU pods got DRA alternatives: the webhook placed every one on one pool", c.Admitted)
	case !alternatives && c.Alternatives > 0:
		return c, fmt.Errorf("%d of %d GPU pods got DRA alternatives from a webhook told to place every pod on one pool", c.Alternatives, c.Admitted)
	}
	return c, nil
}

// checkProductPod checks one GPU pod and reports whether it was placed by
// alternatives; it adds the templates it names to templates.
func checkProductPod(o *corev1.Pod, scheduler string, templates map[string]bool) (alt bool, err error) {
	if o.Annotations[record.AnnotationDecision] == "" || o.Labels[mutate.LabelManaged] != "true" {
		return false, fmt.Errorf("no gpuadmit record (%s) or label %s: the webhook did not decide it", record.AnnotationDecision, mutate.LabelManaged)
	}
	if o.Spec.SchedulerName != scheduler {
		return false, fmt.Errorf("spec.schedulerName %q, want %q", o.Spec.SchedulerName, scheduler)
	}
	whole := false
	for _, c := range o.Spec.Containers {
		for _, l := range []corev1.ResourceList{c.Resources.Limits, c.Resources.Requests} {
			if _, ok := l[resourceGPU]; ok {
				return false, fmt.Errorf("container %s still asks for %s", c.Name, resourceGPU)
			}
			if _, ok := l["nvidia.com/gpu"]; ok {
				whole = true
			}
		}
	}
	claims := 0
	for _, rc := range o.Spec.ResourceClaims {
		name := ""
		if rc.ResourceClaimTemplateName != nil {
			name = *rc.ResourceClaimTemplateName
		}
		if !claim.IsTemplateName(name) {
			return false, fmt.Errorf("resource claim %s is not from a gpuadmit template (%q)", rc.Name, name)
		}
		templates[name] = true
		alt = alt || claim.IsAlternativesName(name)
		claims++
	}
	if claims == 0 && !whole {
		return false, fmt.Errorf("neither a claim from a gpuadmit template nor nvidia.com/gpu")
	}
	return alt, nil
}

// ownerName names the object every pod of a product-path replay names as
// its controller.
const ownerName = "replay-workload"

// productOwner creates the object the pods name as their controller. A
// user's GPU pods come from a workload controller (a Deployment, a Job),
// and gpuadmit gives gpuadmit-scheduler only such pods, which are replaced
// should it go away; the bench creates the pods itself, in trace order,
// each with a controller reference to this ConfigMap, which no controller
// acts on (no ReplicaSet or Job controller scales or deletes them) and
// which keeps the garbage collector from deleting them as orphans. Every
// product-path configuration does the same, so their pods are alike.
func (r *replay) productOwner(ctx context.Context) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: ownerName}}
	cm, err := r.cs.CoreV1().ConfigMaps(Namespace).Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	r.owner = metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID, Controller: ptr.To(true)}
	return nil
}

// isDenial reports whether err is gpuadmit's webhook refusing a pod.
func isDenial(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "denied the request")
}

// waitWebhook waits until gpuadmit's webhook admits, in a dry run, a pod
// of one whole GPU of each model of the nodes, given to the
// configuration's scheduler (for gpuadmit-scheduler: once its leader holds
// the Lease and gpuadmit's controller has given it the pools), and a pod
// of any model as the configuration places it: with alternatives over
// every model's pool, or on one pool. The webhook's inventory and the
// controller's record are built in the background.
func (r *replay) waitWebhook(ctx context.Context) error {
	ms := models(r.w.Nodes)
	progress(r.o, "%s: waiting for the webhook to admit pods of %s to %s", r.s.config, strings.Join(ms, ", "), r.s.name)
	why := ""
	err := until(ctx, 3*time.Minute, func() (bool, error) {
		for _, m := range append(ms, "") {
			probe := probePod(m)
			probe.OwnerReferences = []metav1.OwnerReference{r.owner}
			p, err := r.cs.CoreV1().Pods(Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if why = probeWhy(p, err, m, r.s, len(ms)); why != "" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%w: %s", err, why)
	}
	return nil
}

// probeWhy says why a probe pod of model (any, where empty) is not yet
// admitted as s places it, "" when it is.
func probeWhy(p *corev1.Pod, err error, model string, s scheduler, models int) string {
	switch {
	case err != nil:
		return fmt.Sprintf("probe of %q: %v", model, err)
	case p.Spec.SchedulerName != s.name:
		return fmt.Sprintf("probe of %q given to %q", model, p.Spec.SchedulerName)
	case model != "":
		return ""
	case s.onePool && mutate.PoolOf(p) == "":
		return fmt.Sprintf("probe placed on no one pool: %s", p.Annotations[record.AnnotationDecision])
	case !s.onePool && len(mutate.PoolsOf(p)) != models:
		return fmt.Sprintf("probe has alternatives on pools %v, want %d: %s", mutate.PoolsOf(p), models, p.Annotations[record.AnnotationDecision])
	}
	return ""
}

package claim

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

var h100OrA100 = []Alternative{
	{Backend: BackendMIG, Model: "H100-80GB", Profile: "1g.10gb+me", Count: 1},
	{Backend: BackendShared, Model: "A100-40GB", MiB: 8192},
	{Backend: BackendWhole, Model: "A100-40GB", Count: 2},
}

// TestAlternativesSpecListsThemInOrder: one request, a subrequest per
// alternative in order, each of its class and on its model by the driver's
// model attribute; a share asks for its memory as consumable capacity.
func TestAlternativesSpecListsThemInOrder(t *testing.T) {
	on := func(model string) []resourceapi.DeviceSelector {
		return []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: `device.attributes["gpu.gpuadmit.io"].model == "` + model + `"`}}}
	}
	exact := resourceapi.DeviceAllocationModeExactCount
	want := []resourceapi.DeviceSubRequest{
		{Name: "mig0", DeviceClassName: "mig-1g.10gb.me.gpuadmit.io", Selectors: on("H100-80GB"), AllocationMode: exact, Count: 1},
		{Name: "shared1", DeviceClassName: "gpu-share.gpuadmit.io", Selectors: on("A100-40GB"), AllocationMode: exact, Count: 1,
			Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("8Gi")}}},
		{Name: "whole2", DeviceClassName: "gpu.gpuadmit.io", Selectors: on("A100-40GB"), AllocationMode: exact, Count: 2},
	}
	reqs := AlternativesSpec(h100OrA100).Devices.Requests
	if len(reqs) != 1 || reqs[0].Name != Request || reqs[0].Exactly != nil {
		t.Fatalf("requests %+v, want one, %q, of firstAvailable only", reqs, Request)
	}
	if diff := cmp.Diff(want, reqs[0].FirstAvailable); diff != "" {
		t.Errorf("subrequests (-want +got):\n%s", diff)
	}
	name := AlternativesTemplateName(h100OrA100)
	if !IsTemplateName(name) || !IsAlternativesName(name) {
		t.Errorf("%s is not taken for gpuadmit's template name", name)
	}
	reordered := []Alternative{h100OrA100[1], h100OrA100[0], h100OrA100[2]}
	if AlternativesTemplateName(reordered) == name {
		t.Error("two orders of the same alternatives have one template")
	}
}

// TestAlternativesOfTrustsOnlyTheNameItHashes: a recorded list is read
// back only under the name its spec hashes to.
func TestAlternativesOfTrustsOnlyTheNameItHashes(t *testing.T) {
	name := AlternativesTemplateName(h100OrA100)
	ann := EncodeAlternatives(map[string][]Alternative{name: h100OrA100})
	if got, ok := AlternativesOf(ann, name); !ok || !cmp.Equal(got, h100OrA100) {
		t.Errorf("AlternativesOf = %v, %v; want the alternatives", got, ok)
	}
	forged := EncodeAlternatives(map[string][]Alternative{name: h100OrA100[:1]})
	if _, ok := AlternativesOf(forged, name); ok {
		t.Error("AlternativesOf took alternatives whose spec the name does not hash")
	}
	if _, ok := AlternativesOf("not json", name); ok {
		t.Error("AlternativesOf took an unreadable annotation")
	}
}

// TestReconcilerMakesAlternativesTemplatesFromThePodsRecord: the
// reconciler creates an alternatives template from the record of a pod
// that names it, and none from a record that does not hash to the name.
func TestReconcilerMakesAlternativesTemplatesFromThePodsRecord(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	name := AlternativesTemplateName(h100OrA100)
	good := sharePod("alt", corev1.PodPending, name)
	good.Annotations = map[string]string{AnnotationAlternatives: EncodeAlternatives(map[string][]Alternative{name: h100OrA100})}
	other := AlternativesTemplateName(h100OrA100[:2])
	forged := sharePod("forged-alt", corev1.PodPending, other)
	forged.Annotations = map[string]string{AnnotationAlternatives: EncodeAlternatives(map[string][]Alternative{other: h100OrA100})}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(good, forged).Build()
	ev := &eventLog{}
	r := NewReconciler(c, ev, clocktesting.NewFakePassiveClock(now))
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "team-a"}}); err == nil {
		t.Error("Reconcile hid that a template could not be created")
	}
	got := &resourceapi.ResourceClaimTemplate{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: name}, got); err != nil {
		t.Fatalf("template %s: %v", name, err)
	}
	if diff := cmp.Diff(AlternativesSpec(h100OrA100), got.Spec.Spec); diff != "" {
		t.Errorf("template spec (-want +got):\n%s", diff)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "team-a", Name: other}, got); err == nil {
		t.Errorf("template %s was made from a record that does not hash to it", other)
	}
	if diff := cmp.Diff([]string{"ClaimTemplateMissing forged-alt"}, ev.reasons); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

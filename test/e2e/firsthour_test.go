package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/gpuadmit/gpuadmit/pkg/webhook"
)

// TestFirstHourMissingPriorityClass: a namespace mapping a class to a
// PriorityClass the cluster lacks gets gpuadmit's denial, naming the class
// and how to create it, not the API server's bare refusal after gpuadmit
// admitted the pod.
func TestFirstHourMissingPriorityClass(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{}
	ns.Name, ns.Labels = "e2e-noclass", map[string]string{"gpuadmit.io/priority.training": "e2e-no-such-class"}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatalf("step create namespace: %v", err)
	}
	defer env.Client.Delete(ctx, ns)
	p := gpuPod(ns.Name, "train", map[string]string{"nvidia.com/gpu": "1"})
	p.Labels = map[string]string{"gpuadmit.io/class": "training"}
	err := env.Client.Create(ctx, p)
	if err == nil {
		defer deleteAll(ctx, ns.Name, p)
		t.Fatalf("created with PriorityClass %q, which does not exist", p.Spec.PriorityClassName)
	}
	for _, want := range []string{`admission webhook "pods.mutate.gpuadmit.io" denied`, `PriorityClass "e2e-no-such-class"`, "kubectl create priorityclass e2e-no-such-class"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestFirstHourDenialEventsNamePods: two bare pods denied in one namespace,
// for different reasons, are two GPUDenied Events, each naming its pod.
// Before, client-go merged them into one Event with the first pod's note.
func TestFirstHourDenialEventsNamePods(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{}
	ns.Name = "e2e-denials"
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatalf("step create namespace: %v", err)
	}
	defer env.Client.Delete(ctx, ns)
	pods := map[string]*corev1.Pod{
		"too-many": gpuPod(ns.Name, "too-many", map[string]string{"nvidia.com/gpu": "64"}),
		"no-model": gpuPod(ns.Name, "no-model", map[string]string{"nvidia.com/gpu": "1"}),
	}
	pods["no-model"].Annotations = map[string]string{"gpuadmit.io/model": "B200"}
	for name, p := range pods {
		if err := env.Client.Create(ctx, p); err == nil || !strings.Contains(err.Error(), "denied") {
			t.Fatalf("step create %s: %v, want a denial", name, err)
		}
	}
	notes := map[string]string{}
	waitFor(t, "a GPUDenied Event per pod", 30*time.Second, func() (bool, string) {
		var list eventsv1.EventList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns.Name)); err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Reason == webhook.ReasonDenied && e.Related != nil {
				notes[e.Related.Name] = e.Note
			}
		}
		return len(notes) == len(pods), fmt.Sprintf("Events by related pod: %v", notes)
	})
	for name, note := range notes {
		if !strings.HasPrefix(note, "Pod "+name+": ") {
			t.Errorf("the Event related to pod %s says %q", name, note)
		}
	}
	if !strings.Contains(notes["no-model"], "B200") || strings.Contains(notes["too-many"], "B200") {
		t.Errorf("each Event should carry its own pod's reason: %v", notes)
	}
}

// warnings collects the API server's warnings to one client.
type warnings struct {
	mu  sync.Mutex
	got []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, text)
}

// TestFirstHourReapply: what docs/webhook.md says about applying a bare example
// pod again. A pod made by client-side `kubectl apply` (its
// last-applied-configuration) whose GPU resources gpuadmit rewrote comes
// back with gpuadmit's warning; applying the same file again server-side is
// refused by the API server, as docs/webhook.md says; a saved pod, recreated,
// passes (TestDryRunAndReapply).
func TestFirstHourReapply(t *testing.T) {
	ctx := context.Background()
	b, err := os.ReadFile(filepath.Join(root, "examples/pods/gpushare.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	applied := readPod(t, filepath.Join(root, "examples/pods/gpushare.yaml"))
	applied.Name = "gpushare-applied"
	applied.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: string(b)}
	w := &warnings{}
	cfg := rest.CopyConfig(env.Config)
	cfg.WarningHandler = w
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, applied); err != nil {
		t.Fatalf("step create as kubectl apply: %v", err)
	}
	defer deleteAll(ctx, applied.Namespace, applied)
	w.mu.Lock()
	said := strings.Join(w.got, "\n")
	w.mu.Unlock()
	if !strings.Contains(said, "kubectl replace --force") {
		t.Errorf("warnings %q, want gpuadmit's about applying the file again", said)
	}

	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(b, &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetName("gpushare-ssa")
	apply := func() error {
		return env.Client.Patch(ctx, u.DeepCopy(), client.Apply, client.FieldOwner("kubectl"), client.ForceOwnership) //nolint:staticcheck // kubectl apply --server-side
	}
	if err := apply(); err != nil {
		t.Fatalf("step server-side apply: %v", err)
	}
	defer env.Client.Delete(ctx, u, client.GracePeriodSeconds(0))
	err = apply()
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "pod updates may not change fields") {
		t.Errorf("server-side apply of the same file again: %v; docs/webhook.md says the API server refuses it", err)
	}
}

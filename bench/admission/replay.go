package admission

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
)

// ReplayPatch is the patch the replay configuration answered every pod
// with: what gpuadmit changed in the run's template pod.
type ReplayPatch struct {
	Ops []jsonpatch.Operation `json:"ops"`
	// Bytes is the patch's JSON size, as the API server receives it.
	Bytes int `json:"bytes"`
}

// captureReplay dry-runs the template pod once with the no-op webhook and
// once with gpuadmit, and writes the JSON patch between the two pods the
// API server returned (but for what it sets itself: uid, times, versions,
// managed fields) for the no-op server to answer with at ReplayPath.
func (b *bench) captureReplay(ctx context.Context) (*ReplayPatch, error) {
	pods := map[string]*corev1.Pod{}
	for _, c := range []string{Noop, Gpuadmit} {
		if err := b.hooks.register(ctx, c); err != nil {
			return nil, err
		}
		p, err := createOne(ctx, b.cs, Namespace, "replay", 0, true)
		if err != nil {
			return nil, fmt.Errorf("%s: dry-run the template pod: %w", c, err)
		}
		if err := b.hooks.unregister(ctx, c); err != nil {
			return nil, err
		}
		pods[c] = p
	}
	ops, err := patchBetween(pods[Noop], pods[Gpuadmit])
	if err != nil {
		return nil, err
	}
	out, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(b.replayFile, out, 0o644); err != nil {
		return nil, err
	}
	return &ReplayPatch{Ops: ops, Bytes: len(out)}, nil
}

// patchBetween is the JSON patch from pod a to pod b, two answers of the
// API server to one create, leaving out the fields it sets on every
// object (which differ between any two creates).
func patchBetween(a, b *corev1.Pod) ([]jsonpatch.Operation, error) {
	norm := func(p *corev1.Pod) ([]byte, error) {
		p = p.DeepCopy()
		p.UID, p.ResourceVersion, p.Generation, p.ManagedFields = "", "", 0, nil
		p.CreationTimestamp.Reset()
		return json.Marshal(p)
	}
	ja, err := norm(a)
	if err != nil {
		return nil, err
	}
	jb, err := norm(b)
	if err != nil {
		return nil, err
	}
	ops, err := jsonpatch.CreatePatch(ja, jb)
	if err != nil {
		return nil, err
	}
	if len(ops) == 0 {
		return nil, fmt.Errorf("gpuadmit changed nothing in the template pod: nothing to replay")
	}
	return ops, nil
}

package dra

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// TestUpgradeReadsACheckpointWithoutUUIDs: today's agent takes over a
// checkpoint the agent before ec9271f wrote (the same version 1, but no
// "uuid" of the GPU a device was when prepared) across a reboot: it
// prepares the claims again with the same answer and the same CDI specs,
// still counts their memory against an over-committing claim, and
// releases one deleted from the API.
func TestUpgradeReadsACheckpointWithoutUUIDs(t *testing.T) {
	k := newKubelet(t, node(t)...)
	a, m := claim("a", alloc{"gpu-0", 10}), claim("m", alloc{"gpu-2-mig-3g-40gb-1", 0})
	k.add(a, m)
	first := k.prepare(a, m)
	before := map[string]*cdispec.Spec{"a": readCDI(t, k, a), "m": readCDI(t, k, m)}
	// The running driver read its checkpoint at start; the next one reads this.
	if dropped := dropUUIDs(t, k.opts.DataDir); dropped != 2 {
		t.Fatalf("the checkpoint held %d device UUIDs, want 2 (one per claim): its format changed", dropped)
	}

	k.reboot()
	if diff := cmp.Diff(first, k.prepare(a, m), protocmp.Transform()); diff != "" {
		t.Errorf("prepared again from the old checkpoint (-before +after):\n%s", diff)
	}
	after := map[string]*cdispec.Spec{"a": readCDI(t, k, a), "m": readCDI(t, k, m)}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("CDI specs written again from the old checkpoint (-before +after):\n%s", diff)
	}

	over := claim("over", alloc{"gpu-0", 75})
	k.add(over)
	want := "claim ns/over: device gpu-0: the claim consumes 76800 MiB but other claims already hold 10240 of its 81559 MiB: that would over-commit the GPU"
	if got := k.prepare(over)[string(over.UID)].Error; got != want {
		t.Errorf("a claim over the old checkpoint's share:\n got %q\nwant %q", got, want)
	}

	if err := k.api.ResourceV1().ResourceClaims(m.Namespace).Delete(context.Background(), m.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	gone, err := k.driver.ReleaseDeleted(context.Background(), k.api)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]types.UID{m.UID}, gone); diff != "" {
		t.Errorf("released (-want +got):\n%s", diff)
	}
}

// dropUUIDs rewrites the checkpoint in dir as the agent before the UUID
// was kept wrote it, and returns how many UUIDs it dropped.
func dropUUIDs(t *testing.T, dir string) int {
	t.Helper()
	path := filepath.Join(dir, checkpointFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cp struct {
		Version int `json:"version"`
		Claims  map[string]struct {
			Namespace string           `json:"namespace"`
			Name      string           `json:"name"`
			Devices   []map[string]any `json:"devices"`
		} `json:"claims"`
	}
	if err := json.Unmarshal(b, &cp); err != nil {
		t.Fatal(err)
	}
	dropped := 0
	for _, c := range cp.Claims {
		for _, d := range c.Devices {
			if _, ok := d["uuid"]; ok {
				delete(d, "uuid")
				dropped++
			}
		}
	}
	if b, err = json.Marshal(cp); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dropped
}

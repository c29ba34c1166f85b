package record

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Annotations of the sealed record, written only where record keys are configured.
const (
	// AnnotationWritten lists every value gpuadmit wrote into the pod (see Written).
	AnnotationWritten = "gpuadmit.io/written"
	// AnnotationMAC seals gpuadmit's record: "v2:<key id>:<MAC, base64url>".
	AnnotationMAC = "gpuadmit.io/mac"

	// MACVersion is the seal gpuadmit writes: its record carries when it
	// was sealed and, for a workload's pod template, the workload (see
	// Sealed). MACVersion1 is the seal of releases before seals expired,
	// bound to nothing but the namespace; it still verifies, and what it
	// is worth is in verify.
	MACVersion  = "v2"
	MACVersion1 = "v1"
	// MinKeyBytes is the shortest record key accepted (`openssl rand -hex 32` gives 64).
	MinKeyBytes = 32
)

// KeySource returns the record keys in force now; the webhook reloads them
// from a mounted Secret.
type KeySource interface {
	RecordKeys() KeySet
}

// KeySet holds the keys that seal gpuadmit's record. Current seals new
// records; a record sealed with Current or Previous verifies, so a rotation
// loses nothing while replicas pick up the new Secret at different times.
// The zero value has no key: records are not sealed, and a pod that comes
// back is verified by deciding again.
type KeySet struct {
	Current, Previous []byte
}

// RecordKeys returns the set itself: a KeySet is a KeySource that never changes.
func (k KeySet) RecordKeys() KeySet { return k }

// Validate refuses keys too short to resist guessing.
func (k KeySet) Validate() error {
	for name, key := range map[string][]byte{"current": k.Current, "previous": k.Previous} {
		if len(key) > 0 && len(key) < MinKeyBytes {
			return fmt.Errorf("record key %s has %d bytes, want at least %d", name, len(key), MinKeyBytes)
		}
	}
	if len(k.Current) == 0 && len(k.Previous) > 0 {
		return fmt.Errorf("record key previous is set without current")
	}
	return nil
}

// lookup returns the key whose id is id.
func (k KeySet) lookup(id string) ([]byte, bool) {
	for _, key := range [][]byte{k.Current, k.Previous} {
		if len(key) > 0 && KeyID(key) == id {
			return key, true
		}
	}
	return nil, false
}

// KeyID names a key in the MAC annotation without revealing it: the first
// 12 hex digits of its SHA-256.
func KeyID(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:])[:12]
}

// macInput is what the MAC covers. It is encoded with encoding/json, which
// is canonical for this type: fields in the order declared, map keys sorted,
// no insignificant whitespace, every string escaped the same way. Record is
// every gpuadmit annotation of the pod but AnnotationMAC itself — the
// human-readable decision, the original request and AnnotationWritten, which
// carries the policy revision and every value gpuadmit wrote.
type macInput struct {
	Version   string            `json:"v"`
	Namespace string            `json:"ns"`
	Record    map[string]string `json:"record"`
}

// sum is the HMAC-SHA256 of the pod's record in namespace under key, for
// the seal format version.
func sum(key []byte, version, namespace string, pod *corev1.Pod) []byte {
	in := macInput{Version: version, Namespace: namespace, Record: map[string]string{}}
	for k, v := range pod.Annotations {
		if IsOwnAnnotation(k) && k != AnnotationMAC {
			in.Record[k] = v
		}
	}
	b, _ := json.Marshal(in) // strings and maps of strings always encode
	h := hmac.New(sha256.New, key)
	h.Write(b)
	return h.Sum(nil)
}

// Seal writes the record of what gpuadmit wrote and its MAC under the
// current key; without a current key it writes neither. The record carries
// the sealing time at, and workload where pod is that workload's pod
// template (nil for a pod): both are under the MAC.
func Seal(keys KeySet, namespace string, pod *corev1.Pod, w *Written, at time.Time, workload *WorkloadRef) error {
	if len(keys.Current) == 0 || w == nil {
		return nil
	}
	w.SealedAt, w.Workload = at.Unix(), workload
	raw, err := json.Marshal(w)
	if err != nil {
		return fmt.Errorf("encode %s: %w", AnnotationWritten, err)
	}
	SetMeta(&pod.Annotations, map[string]string{AnnotationWritten: string(raw)})
	mac := base64.RawURLEncoding.EncodeToString(sum(keys.Current, MACVersion, namespace, pod))
	pod.Annotations[AnnotationMAC] = strings.Join([]string{MACVersion, KeyID(keys.Current), mac}, ":")
	return nil
}

// Sealed is a record whose MAC verified.
type Sealed struct {
	// Written is what the record says gpuadmit wrote.
	Written *Written
	// Version is the seal's format: MACVersion, or MACVersion1 (no
	// sealing time, bound to no workload).
	Version string
	// MAC is the AnnotationMAC value, which a workload's pods carry as its
	// template does.
	MAC string
}

// At is when the record was sealed.
func (s *Sealed) At() time.Time { return time.Unix(s.Written.SealedAt, 0).UTC() }

// Unseal returns the written record of a pod whose MAC verifies under one of
// keys, or says why it does not (no MAC, an unknown key, a wrong MAC).
func Unseal(keys KeySet, namespace string, pod *corev1.Pod) (*Sealed, error) {
	raw, ok := pod.Annotations[AnnotationMAC]
	if !ok {
		return nil, fmt.Errorf("%s is missing", AnnotationMAC)
	}
	parts := strings.Split(raw, ":")
	if len(parts) != 3 || (parts[0] != MACVersion && parts[0] != MACVersion1) {
		return nil, fmt.Errorf("%s is not a %s or %s MAC", AnnotationMAC, MACVersion, MACVersion1)
	}
	key, ok := keys.lookup(parts[1])
	if !ok {
		return nil, fmt.Errorf("%s is sealed with key %s, which this replica does not hold", AnnotationMAC, parts[1])
	}
	got, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || !hmac.Equal(got, sum(key, parts[0], namespace, pod)) {
		return nil, fmt.Errorf("%s does not match the record", AnnotationMAC)
	}
	var w Written
	if err := json.Unmarshal([]byte(pod.Annotations[AnnotationWritten]), &w); err != nil {
		return nil, fmt.Errorf("%s: %w", AnnotationWritten, err)
	}
	if parts[0] == MACVersion && w.SealedAt == 0 {
		return nil, fmt.Errorf("%s has no sealing time", AnnotationWritten)
	}
	return &Sealed{Written: &w, Version: parts[0], MAC: raw}, nil
}

// WithSealOf returns a copy of pod whose seal annotations are those of from
// (none where from has none).
func WithSealOf(pod, from *corev1.Pod) *corev1.Pod {
	out := pod.DeepCopy()
	for _, k := range []string{AnnotationWritten, AnnotationMAC} {
		delete(out.Annotations, k)
		if v, ok := from.Annotations[k]; ok {
			SetMeta(&out.Annotations, map[string]string{k: v})
		}
	}
	return out
}

// Package mutate is gpuadmit's admission handlers. They turn a pod's GPU
// intent, a policy decision and the cluster inventory into the pod the
// cluster can run: final GPU resources (requests = limits, integers), the
// chosen pool's nodeSelector and tolerations, the PriorityClass, gpuadmit's
// decision record, and the RFC 6902 patch between the pod as it arrived and
// that pod. The choice of pool is package decide's, the writing of the pod
// package write's, and gpuadmit's record on the pod package record's.
//
// Mutation is idempotent. A pod that arrives carrying gpuadmit's own
// annotations (reinvocation, or a saved mutated pod applied again) is checked
// by recomputing: gpuadmit restores the request it recorded, decides again and
// compares. What gpuadmit would write for the pod is its own and passes
// unchanged; anything else is forged and denied. Where record keys seal the
// record, the seal stands in for that second decision only within the
// reinvocation window, and, for a Kueue Job's template, on the live Job's
// own pods (expiry.go); elsewhere a pod whose decision changed is refused,
// saying what changed.
package mutate

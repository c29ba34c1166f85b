// Package write writes gpuadmit's decision into a pod and says how the pod
// changed: the RFC 6902 patch between the pod as it arrived and the pod as
// gpuadmit admits it, and that patch's bytes for the admission response.
package write

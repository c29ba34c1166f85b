// Package record is gpuadmit's record on a pod it admitted: the
// gpuadmit.io/ annotations users cannot set, the GPU resources the author
// wrote (AnnotationRequest), every value gpuadmit wrote (Written), and,
// where record keys are configured, the seal over them (Seal, Unseal).
// The writer fills it; the admission handler reads it back to verify a pod
// that comes back. It imports neither.
package record

// Package write writes gpuadmit's decision into a pod and says how the pod
// changed: the GPU resources, claims, selectors, tolerations, affinity and
// PriorityClass of a decide.Choice (Apply) or of a pod placed by
// alternatives (ApplyAlternatives), the scheduler the handler then gives
// it (SetScheduler, undone by RestoreScheduler), gpuadmit's record of them
// (record.Written), the explanation and warnings a person reads, and the
// RFC 6902 patch between the pod as it arrived and the pod as gpuadmit
// admits it, with that patch's bytes for the admission response.
package write

package placement

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// requestSigner is the key of the fragment GPUAdmit signs pods with.
const requestSigner = "gpuadmit.io/GPUAdmit.Request()"

// signedRequest is what of a pod GPUAdmit's filter and score read.
type signedRequest struct {
	MilliCPU, MemoryMiB int64
	Resource            corev1.ResourceName
	Shares              []int64
	WholeGPUs           int64
}

// SignPod tells opportunistic batching when two pods are alike for
// GPUAdmit. Batching hands the next pod of a signature the best node left
// from the last pod's scores, re-scoring only the node that pod took, so it
// is correct only while every other node's score depends on nothing but
// that node and what the signature holds of the pod:
//
//   - a pod with ResourceClaims is not signed: its share's size is in a
//     claim, not in the pod (the DynamicResources plugin does not sign
//     these pods either);
//   - a pod, with GPU or without (whose CPU and memory are scored by what
//     they strand), is signed only when the args fix the target workload:
//     a workload derived from the pods changes as GPU pods arrive, and
//     with it every node's score;
//   - otherwise the fragment is the pod's CPU, memory and GPU request.
func (pl *Plugin) SignPod(_ context.Context, pod *corev1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	if len(pod.Spec.ResourceClaims) > 0 {
		return nil, fwk.NewStatus(fwk.Unschedulable, "a pod's GPU share is sized in its ResourceClaim")
	}
	r, err := readRequest(pod, nil)
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	if !pl.fixedWorkload {
		return nil, fwk.NewStatus(fwk.Unschedulable, "the target workload is derived from the GPU pods and changes with each")
	}
	s := signedRequest{MilliCPU: r.milliCPU, MemoryMiB: r.memoryMiB, Resource: r.shareResource}
	for _, it := range r.items {
		if it.whole {
			s.WholeGPUs++
		} else {
			s.Shares = append(s.Shares, it.shares)
		}
	}
	return []fwk.SignFragment{{Key: requestSigner, Value: s}}, nil
}

// Package decide chooses what a pod gets: the policy's decision, memoized
// per template, namespace, quota, pools and revision (Memo); the candidates
// the pod may not take whatever the policy says (GateSchedulers); and the
// pool it goes to with what each GPU container gets there (Choose), or, on
// DRA pools, the alternatives the scheduler chooses among
// (ChooseAlternatives). It reads free capacity through Capacity and the
// cluster's workload through Demand, and writes nothing into the pod.
package decide

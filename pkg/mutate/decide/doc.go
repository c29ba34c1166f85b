// Package decide chooses what a pod gets: the policy's decision, memoized
// per template, namespace, quota, pools and revision (Memo).
package decide

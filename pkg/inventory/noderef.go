package inventory

import (
	"maps"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
)

// nodeRef is a node as a pod's node affinity is matched against it (name
// and labels), shared by every inventory built from one Live. Labels that
// Build does not read change often on some clusters and never change a
// pool, so the Live's Node handler swaps them in here instead of rebuilding
// the pools: a pod's nodeSelector sees a label as soon as the informer does.
type nodeRef struct{ obj atomic.Pointer[corev1.Node] }

func newNodeRef(name string, labels map[string]string) *nodeRef {
	r := &nodeRef{}
	r.obj.Store(newNodeObject(name, labels))
	return r
}

// nodeRefs are a Live's nodeRefs by node name. Only the Node handler
// changes an existing one, in the informer's order; a rebuild only adds
// those it finds missing, so a ref's labels never go back to older ones.
type nodeRefs struct {
	mu sync.Mutex
	m  map[string]*nodeRef
}

// get is n's ref, made from n's labels when it has none yet.
func (rs *nodeRefs) get(n *corev1.Node) *nodeRef {
	if rs == nil {
		return newNodeRef(n.Name, n.Labels)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r, ok := rs.m[n.Name]; ok {
		return r
	}
	if rs.m == nil {
		rs.m = map[string]*nodeRef{}
	}
	r := newNodeRef(n.Name, n.Labels)
	rs.m[n.Name] = r
	return r
}

// set gives n's ref n's labels, making the ref where it has none.
func (rs *nodeRefs) set(n *corev1.Node) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r, ok := rs.m[n.Name]; ok {
		if cur := r.obj.Load(); !maps.Equal(cur.Labels, n.Labels) {
			r.obj.Store(newNodeObject(n.Name, n.Labels))
		}
		return
	}
	if rs.m == nil {
		rs.m = map[string]*nodeRef{}
	}
	rs.m[n.Name] = newNodeRef(n.Name, n.Labels)
}

func (rs *nodeRefs) remove(name string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	delete(rs.m, name)
}

// keepOnly drops the refs of nodes a rebuild no longer found.
func (rs *nodeRefs) keepOnly(nodes []corev1.Node) {
	names := make(map[string]bool, len(nodes))
	for i := range nodes {
		names[nodes[i].Name] = true
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for name := range rs.m {
		if !names[name] {
			delete(rs.m, name)
		}
	}
}

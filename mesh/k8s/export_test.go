package k8s

import corev1 "k8s.io/api/core/v1"

// CachedNode returns the Node named name as c's Node cache holds it.
func CachedNode(c *Client, name string) (*corev1.Node, bool) {
	obj, ok, _ := c.nodes.GetStore().GetByKey(name)
	if !ok {
		return nil, false
	}
	return obj.(*corev1.Node), true
}

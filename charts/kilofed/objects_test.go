package chart

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	aboutv1 "github.com/kilofed/kilofed/federation/apis/about/v1alpha1"
)

// scheme knows every type the chart renders but the ServiceMonitor.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, aboutv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// strict decodes YAML into typed objects and fails on unknown or duplicate fields.
var strict = json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{Yaml: true, Strict: true})

// rendered is a render decoded into typed objects (unstructured for kinds
// the scheme does not know, such as ServiceMonitor).
type rendered struct {
	t    *testing.T
	objs []client.Object
}

// renderObjects renders o and decodes every document strictly.
func renderObjects(t *testing.T, o Options) rendered {
	t.Helper()
	m, err := Render(o)
	if err != nil {
		t.Fatal(err)
	}
	return decodeAll(t, m)
}

func decodeAll(t *testing.T, manifests string) rendered {
	t.Helper()
	r := rendered{t: t}
	for _, doc := range strings.Split(manifests, "\n---\n") {
		doc = strings.TrimPrefix(doc, "---\n")
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		obj, gvk, err := strict.Decode([]byte(doc), nil, nil)
		if runtime.IsNotRegisteredError(err) {
			u := &unstructured.Unstructured{}
			if err := yaml.UnmarshalStrict([]byte(doc), &u.Object); err != nil {
				t.Fatalf("%s: %v\n%s", gvk, err, doc)
			}
			r.objs = append(r.objs, u)
			continue
		}
		if err != nil {
			t.Fatalf("decode strictly: %v\n%s", err, doc)
		}
		co, ok := obj.(client.Object)
		if !ok {
			t.Fatalf("%s is not an object", gvk)
		}
		co.GetObjectKind().SetGroupVersionKind(*gvk)
		r.objs = append(r.objs, co)
	}
	return r
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// find returns the object of that kind, namespace and name, or nil.
func (r rendered) find(kind, namespace, name string) client.Object {
	for _, o := range r.objs {
		if o.GetObjectKind().GroupVersionKind().Kind == kind && o.GetNamespace() == namespace && o.GetName() == name {
			return o
		}
	}
	return nil
}

// get is find that fails the test when the object is absent.
func get[T client.Object](r rendered, kind, namespace, name string) T {
	r.t.Helper()
	o := r.find(kind, namespace, name)
	if o == nil {
		r.t.Fatalf("no %s %s/%s rendered; have:\n%s", kind, namespace, name, r.inventory())
	}
	typed, ok := o.(T)
	if !ok {
		r.t.Fatalf("%s %s/%s is a %T", kind, namespace, name, o)
	}
	return typed
}

// ofKind returns the objects of a kind.
func (r rendered) ofKind(kind string) []client.Object {
	var out []client.Object
	for _, o := range r.objs {
		if o.GetObjectKind().GroupVersionKind().Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

// inventory lists kind namespace/name, one per line.
func (r rendered) inventory() string {
	var b strings.Builder
	for _, o := range r.objs {
		b.WriteString(o.GetObjectKind().GroupVersionKind().Kind + " " + o.GetNamespace() + "/" + o.GetName() + "\n")
	}
	return b.String()
}

// values builds a values map from "a.b.c" keys, as helm --set does.
func values(kv ...any) map[string]any {
	out := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		path := strings.Split(kv[i].(string), ".")
		m := out
		for _, p := range path[:len(path)-1] {
			next, ok := m[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[p] = next
			}
			m = next
		}
		m[path[len(path)-1]] = kv[i+1]
	}
	return out
}

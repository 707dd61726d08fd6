{{/* Labels of every object of the release. */}}
{{- define "kilofed.labels" -}}
app.kubernetes.io/part-of: kilofed
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{/* The agent's pods: the name the seeds' kubectl commands select. */}}
{{- define "kilofed.agentSelector" -}}
app.kubernetes.io/name: kilo
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kilofed.controllerSelector" -}}
app.kubernetes.io/name: kilofed-controller
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The namespace of the federation's objects (fixed: federation/apis kilofed-system). */}}
{{- define "kilofed.systemNamespace" -}}kilofed-system{{- end -}}

{{/* The mesh's topology flags, which kg and kilofed-controller must share. */}}
{{- define "kilofed.meshArgs" -}}
- --mesh-granularity={{ .Values.mesh.granularity }}
- --subnet={{ .Values.mesh.subnet }}
- --port={{ .Values.mesh.port }}
- --topology-label={{ .Values.mesh.topologyLabel }}
- --lease-namespace={{ .Values.mesh.leaseNamespace }}
- --lease-duration={{ .Values.mesh.leaseDuration }}
{{- end -}}

{{/* The CoreDNS server block for clusterset.local; it needs kilofed-dns's fixed ClusterIP. */}}
{{- define "kilofed.corednsServerBlock" -}}
clusterset.local:53 {
    errors
    cache 5
    forward . {{ required "coredns.enabled needs dns.clusterIP: CoreDNS forwards to an IP, so give kilofed-dns a fixed ClusterIP from the Service range" .Values.dns.clusterIP }}
}
{{- end -}}

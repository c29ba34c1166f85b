{{/* The namespace every namespaced object goes into. */}}
{{- define "gpuadmit.namespace" -}}
{{- .Values.namespace.name -}}
{{- end }}

{{/* Labels on every object. */}}
{{- define "gpuadmit.labels" -}}
app.kubernetes.io/name: gpuadmit
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* The webhook pods' labels; the same as deploy/base, so both select alike. */}}
{{- define "gpuadmit.selectorLabels" -}}
app.kubernetes.io/name: gpuadmit
app.kubernetes.io/component: webhook
{{- end }}

{{/* The Secret the webhook serves TLS from. */}}
{{- define "gpuadmit.tlsSecretName" -}}
{{- if eq .Values.certificates.mode "secret" -}}
{{- required "certificates.secret.name is required in secret mode" .Values.certificates.secret.name -}}
{{- else -}}
gpuadmit-webhook-tls
{{- end -}}
{{- end }}

{{/*
The webhook configurations' CA: cert-manager's injection annotation, or the
caBundle given in secret mode (PEM, or already base64).
*/}}
{{- define "gpuadmit.caAnnotations" -}}
{{- if eq .Values.certificates.mode "certManager" -}}
annotations:
  cert-manager.io/inject-ca-from: {{ include "gpuadmit.namespace" . }}/gpuadmit-webhook
{{- end }}
{{- end }}

{{- define "gpuadmit.caBundle" -}}
{{- if eq .Values.certificates.mode "secret" -}}
{{- $ca := required "certificates.secret.caBundle is required in secret mode: the CA that signed the serving certificate" .Values.certificates.secret.caBundle -}}
caBundle: {{ ternary ($ca | b64enc) ($ca | trim) (contains "-----BEGIN" $ca) }}
{{- end -}}
{{- end }}

{{/*
Where the API server calls a webhook path: the Service, or webhook.url (a
base URL) where the API server cannot reach pods through a Service.
*/}}
{{- define "gpuadmit.clientConfig" -}}
{{- with .root.Values.webhook.url -}}
url: {{ printf "%s%s" (trimSuffix "/" .) $.path }}
{{- else -}}
service:
  name: gpuadmit-webhook
  namespace: {{ include "gpuadmit.namespace" .root }}
  path: {{ .path }}
  port: 443
{{- end -}}
{{- end }}

{{/* Namespaces never sent to the webhook: its own, then webhook.excludedNamespaces. */}}
{{- define "gpuadmit.namespaceSelector" -}}
namespaceSelector:
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values: {{ prepend .Values.webhook.excludedNamespaces (include "gpuadmit.namespace" .) | uniq | toJson }}
{{- end }}

{{/* The webhook's --policies argument, empty for the embedded set. */}}
{{- define "gpuadmit.policiesArg" -}}
{{- if eq .Values.policies.source "configMap" -}}
--policies=/policies
{{- else if eq .Values.policies.source "gitSync" -}}
--policies={{ trimSuffix "/" (printf "/git/current/%s" .Values.policies.gitSync.path) }}
{{- end -}}
{{- end }}

{{/* The node agent's namespace: its own, for the hostPath mounts the webhook's forbids. */}}
{{- define "gpuadmit.agentNamespace" -}}
gpuadmit-agent
{{- end }}

{{/* Labels on the node agent's objects. */}}
{{- define "gpuadmit.agentLabels" -}}
{{ include "gpuadmit.labels" . | replace "app.kubernetes.io/name: gpuadmit" "app.kubernetes.io/name: gpuadmit-agent" }}
{{- end }}

{{/* The nodes the agent (and with MPS, its daemon) runs on. */}}
{{- define "gpuadmit.agentNodeSelector" -}}
gpuadmit.io/node-mode: device-plugin
{{- if .Values.agent.mps.enabled }}
gpuadmit.io/mps: "true"
{{- end }}
{{- end }}

{{/* Labels on gpuadmit-scheduler's objects. */}}
{{- define "gpuadmit.schedulerLabels" -}}
{{ include "gpuadmit.labels" . | replace "app.kubernetes.io/name: gpuadmit" "app.kubernetes.io/name: gpuadmit-scheduler" }}
{{- end }}

{{/* The controller pods' labels; the same as deploy/base/controller.yaml. */}}
{{- define "gpuadmit.controllerSelectorLabels" -}}
app.kubernetes.io/name: gpuadmit
app.kubernetes.io/component: controller
{{- end }}

{{/*
The git-sync native sidecar of policies.source=gitSync, in the webhook's
and the controller's pods alike (both load the policies): it makes its
first sync before the main container starts, then keeps /git/current at the
newest commit.
*/}}
{{- define "gpuadmit.gitSyncSidecar" -}}
{{- if eq .Values.policies.source "gitSync" -}}
{{- $git := .Values.policies.gitSync -}}
initContainers:
  - name: git-sync
    image: {{ $git.image }}
    restartPolicy: Always
    args:
      - --repo={{ required "policies.gitSync.repo is required" $git.repo }}
      - --ref={{ $git.ref }}
      - --root=/git
      - --link=current
      - --period={{ $git.period }}
      - --max-failures=-1
      - --http-bind=:8082
    ports:
      - name: git-sync
        containerPort: 8082
        protocol: TCP
    startupProbe:
      httpGet:
        path: /
        port: git-sync
      periodSeconds: 2
      failureThreshold: 150
    resources:
      {{- toYaml $git.resources | nindent 6 }}
    securityContext:
      runAsUser: 65533
      runAsGroup: 65533
      readOnlyRootFilesystem: true
      allowPrivilegeEscalation: false
      capabilities:
        drop: [ALL]
    volumeMounts:
      - name: git
        mountPath: /git
      - name: git-sync-tmp
        mountPath: /tmp
{{- end -}}
{{- end }}

{{/* Where the main container reads the policies from, for policies.source. */}}
{{- define "gpuadmit.policyMounts" -}}
{{- if eq .Values.policies.source "configMap" -}}
- name: policies
  mountPath: /policies
  readOnly: true
{{- else if eq .Values.policies.source "gitSync" -}}
- name: git
  mountPath: /git
  readOnly: true
{{- end -}}
{{- end }}

{{/* The volumes policyMounts and gitSyncSidecar mount. */}}
{{- define "gpuadmit.policyVolumes" -}}
{{- if eq .Values.policies.source "configMap" -}}
- name: policies
  configMap:
    name: {{ .Values.policies.configMap.name }}
{{- else if eq .Values.policies.source "gitSync" -}}
- name: git
  emptyDir:
    sizeLimit: 256Mi
- name: git-sync-tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end -}}
{{- end }}

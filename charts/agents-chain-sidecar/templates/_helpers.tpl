{{- define "agents-chain-sidecar.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "agents-chain-sidecar.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "agents-chain-sidecar.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}
{{- end -}}

{{- define "agents-chain-sidecar.webhookName" -}}
{{ include "agents-chain-sidecar.fullname" . }}-webhook
{{- end -}}

{{/*
The sidecar container, for charts that embed it directly instead of relying on the webhook:
  containers:
    - name: app
      ...
    {{- include "agents-chain-sidecar.container" (dict "image" "ghcr.io/agents-chain/sidecar:0.1.0" "upstreamPort" 3000) | nindent 4 }}
  volumes:
    {{- include "agents-chain-sidecar.volumes" (dict "policyConfigMap" "billing-policy") | nindent 4 }}
It is the same container `agents-chain inject` and the webhook add (src/kubernetes/inject.ts).
Admin listener: /healthz, /readyz and /metrics are open (kubelet, Prometheus); /stats, audit entries,
agents and approvals need the admin token. Give "adminTokenSecret" (a Secret with key "token", like the
agents-chain.io/admin-token-secret annotation). With "approvals" true (the policy has accessRequests) the
sidecar refuses to start without one, so the template does too, unless "adminInsecureNoToken" is true.
*/}}
{{- define "agents-chain-sidecar.container" -}}
{{- if and .approvals (not .adminTokenSecret) (not .adminInsecureNoToken) }}
{{- fail "agents-chain-sidecar.container: approvals are on: give adminTokenSecret (a Secret with key \"token\"), or adminInsecureNoToken: true to open the admin API to the pod network" }}
{{- end -}}
- name: agents-chain
  image: {{ .image | quote }}
  args: ["serve", "--policy", "/etc/agents-chain/policy.yaml", "--upstream", "http://127.0.0.1:{{ .upstreamPort | default 8081 }}", "--listen", "0.0.0.0:{{ .port | default 8080 }}", "--admin", "0.0.0.0:{{ .adminPort | default 9090 }}"]
  ports:
    - { name: agents-chain, containerPort: {{ .port | default 8080 }}, protocol: TCP }
    - { name: ac-admin, containerPort: {{ .adminPort | default 9090 }}, protocol: TCP }
  readinessProbe: { httpGet: { path: /readyz, port: {{ .adminPort | default 9090 }} }, periodSeconds: 5, timeoutSeconds: 2 }
  livenessProbe: { httpGet: { path: /healthz, port: {{ .adminPort | default 9090 }} }, periodSeconds: 10, timeoutSeconds: 2 }
  {{- if .adminTokenSecret }}
  env:
    # The admin token: /stats, audit entries, agents and approvals answer only with it.
    - name: AGENTS_CHAIN_ADMIN_TOKEN
      valueFrom: { secretKeyRef: { name: {{ .adminTokenSecret | quote }}, key: token } }
  {{- else if .adminInsecureNoToken }}
  env:
    # Explicitly no admin token: anything that reaches the admin port reads audit entries and approves calls.
    - { name: AGENTS_CHAIN_ADMIN_INSECURE_NO_TOKEN, value: "true" }
  {{- end }}
  resources: { requests: { cpu: 50m, memory: 64Mi }, limits: { memory: 256Mi } }
  securityContext:
    runAsNonRoot: true
    runAsUser: 10001
    runAsGroup: 10001
    readOnlyRootFilesystem: true
    allowPrivilegeEscalation: false
    capabilities: { drop: [ALL] }
    seccompProfile: { type: RuntimeDefault }
  volumeMounts:
    - { name: agents-chain-policy, mountPath: /etc/agents-chain, readOnly: true }
    - { name: agents-chain-spool, mountPath: /var/spool/agents-chain }
    - { name: agents-chain-tmp, mountPath: /tmp }
{{- end -}}

{{- define "agents-chain-sidecar.volumes" -}}
- { name: agents-chain-policy, configMap: { name: {{ .policyConfigMap | quote }} } }
- { name: agents-chain-spool, emptyDir: { sizeLimit: 1Gi } }
- { name: agents-chain-tmp, emptyDir: { sizeLimit: 64Mi } }
{{- end -}}

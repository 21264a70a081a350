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

{{- define "agents-chain-sidecar.webhookSelectorLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: webhook
{{- end -}}

{{/*
The injection defaults (src/kubernetes/defaults.ts reads this file: `agents-chain webhook --defaults`,
`agents-chain inject --defaults`). One definition feeds the ConfigMap and the webhook pod's checksum
annotation, so changing a default restarts the webhook.
*/}}
{{- define "agents-chain-sidecar.injectionDefaults" -}}
{{- $i := .Values.injection -}}
image: {{ include "agents-chain-sidecar.image" . | quote }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
captureMode: {{ $i.captureMode }}
nativeSidecar: {{ $i.nativeSidecar }}
port: {{ int $i.port }}
adminPort: {{ int $i.adminPort }}
logLevel: {{ $i.logLevel }}
drainDelaySeconds: {{ int $i.drainDelaySeconds }}
maxInFlight: {{ int $i.maxInFlight }}
maxEventLoopDelayMs: {{ int $i.maxEventLoopDelayMs }}
resources:
  {{- toYaml $i.resources | nindent 2 }}
{{- end -}}

{{/*
The webhook's serving certificate: cert-manager, or an existing Secret with the CA that signed it. Anything
else would install a webhook the API server cannot call, and with failurePolicy Fail no annotated pod
would start, so rendering stops here instead.
*/}}
{{- define "agents-chain-sidecar.checkTLS" -}}
{{- $t := .Values.webhook.tls -}}
{{- if $t.certManager.enabled -}}
{{- if $t.existingSecret -}}
{{- fail (printf "webhook.tls: certManager.enabled is true and existingSecret is %q: cert-manager would overwrite that Secret. Set webhook.tls.certManager.enabled=false to use your own Secret, or unset existingSecret" $t.existingSecret) -}}
{{- end -}}
{{- if $t.caBundle -}}
{{- fail "webhook.tls: caBundle is only used with existingSecret; with certManager.enabled cert-manager injects the CA. Unset webhook.tls.caBundle" -}}
{{- end -}}
{{- else -}}
{{- if not $t.existingSecret -}}
{{- fail "webhook.tls: no TLS material for the webhook. Either keep webhook.tls.certManager.enabled=true (cert-manager must be installed), or set webhook.tls.existingSecret (a kubernetes.io/tls Secret in the release namespace) and webhook.tls.caBundle (base64 of the CA's PEM)" -}}
{{- end -}}
{{- if not $t.caBundle -}}
{{- fail (printf "webhook.tls: existingSecret %q is set but caBundle is empty: the API server cannot verify the webhook's certificate. Set webhook.tls.caBundle to the base64 of the PEM of the CA that signed it" $t.existingSecret) -}}
{{- end -}}
{{- if not (hasPrefix "-----BEGIN CERTIFICATE-----" (b64dec $t.caBundle | trim)) -}}
{{- fail "webhook.tls: caBundle must be the base64 of a PEM certificate (-----BEGIN CERTIFICATE-----...); encode it with: base64 -w0 ca.crt" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The sidecar container, for charts that embed it directly instead of relying on the webhook:
  containers:
    - name: app
      ...
    {{- include "agents-chain-sidecar.container" (dict "image" "ghcr.io/agents-chain/sidecar:0.1.0" "upstreamPort" 3000) | nindent 4 }}
  volumes:
    {{- include "agents-chain-sidecar.volumes" (dict "policyConfigMap" "billing-policy") | nindent 4 }}
It is the sidecar container `agents-chain inject` and the webhook add (src/kubernetes/inject.ts), without
traffic capture: the app keeps listening on upstreamPort (required; the sidecar forwards to 127.0.0.1 there),
the sidecar listens on "port" (default 17480, named agents-chain: point the Service's targetPort at it, and
keep agents off the app's port with the chart's NetworkPolicy) and "adminPort" (default 17490, named
ac-admin). "logLevel" is optional (AGENTS_CHAIN_LOG_LEVEL), and so are "maxInFlight" and "maxEventLoopDelayMs"
(AGENTS_CHAIN_MAX_IN_FLIGHT, AGENTS_CHAIN_MAX_EVENT_LOOP_DELAY_MS; serve's defaults otherwise). Drain on SIGTERM
uses serve's defaults.
Admin listener: /healthz, /readyz and /metrics are open (kubelet, Prometheus); /stats, audit entries,
agents and approvals need the admin token. Give "adminTokenSecret" (a Secret with key "token", like the
agents-chain.io/admin-token-secret annotation). With "approvals" true (the policy has accessRequests) the
sidecar refuses to start without one, so the template does too, unless "adminInsecureNoToken" is true.
*/}}
{{- define "agents-chain-sidecar.container" -}}
{{- if and .approvals (not .adminTokenSecret) (not .adminInsecureNoToken) }}
{{- fail "agents-chain-sidecar.container: approvals are on: give adminTokenSecret (a Secret with key \"token\"), or adminInsecureNoToken: true to open the admin API to the pod network" }}
{{- end -}}
{{- $upstream := required "agents-chain-sidecar.container: upstreamPort is required (the app's port; the sidecar forwards to 127.0.0.1:<upstreamPort>)" .upstreamPort -}}
{{- $port := .port | default 17480 -}}
{{- $admin := .adminPort | default 17490 -}}
{{- if or (eq (int $port) (int $upstream)) (eq (int $admin) (int $upstream)) (eq (int $port) (int $admin)) }}
{{- fail (printf "agents-chain-sidecar.container: port %v, adminPort %v and upstreamPort %v must all differ" $port $admin $upstream) }}
{{- end -}}
- name: agents-chain
  image: {{ .image | quote }}
  args: ["serve", "--policy", "/etc/agents-chain/policy.yaml", "--upstream", "http://127.0.0.1:{{ $upstream }}", "--listen", "[::]:{{ $port }}", "--admin", "[::]:{{ $admin }}"]
  ports:
    - { name: agents-chain, containerPort: {{ $port }}, protocol: TCP }
    - { name: ac-admin, containerPort: {{ $admin }}, protocol: TCP }
  readinessProbe: { httpGet: { path: /readyz, port: {{ $admin }} }, periodSeconds: 5, timeoutSeconds: 2 }
  livenessProbe: { httpGet: { path: /healthz, port: {{ $admin }} }, periodSeconds: 10, timeoutSeconds: 2 }
  startupProbe: { httpGet: { path: /healthz, port: {{ $admin }} }, periodSeconds: 1, timeoutSeconds: 2, failureThreshold: 30 }
  {{- if or .logLevel .adminTokenSecret .adminInsecureNoToken (not (kindIs "invalid" .maxInFlight)) (not (kindIs "invalid" .maxEventLoopDelayMs)) }}
  env:
    {{- with .logLevel }}
    - { name: AGENTS_CHAIN_LOG_LEVEL, value: {{ . | quote }} }
    {{- end }}
    {{- if not (kindIs "invalid" .maxInFlight) }}
    - { name: AGENTS_CHAIN_MAX_IN_FLIGHT, value: {{ int .maxInFlight | toString | quote }} }
    {{- end }}
    {{- if not (kindIs "invalid" .maxEventLoopDelayMs) }}
    - { name: AGENTS_CHAIN_MAX_EVENT_LOOP_DELAY_MS, value: {{ int .maxEventLoopDelayMs | toString | quote }} }
    {{- end }}
    {{- if .adminTokenSecret }}
    # The admin token: /stats, audit entries, agents and approvals answer only with it.
    - name: AGENTS_CHAIN_ADMIN_TOKEN
      valueFrom: { secretKeyRef: { name: {{ .adminTokenSecret | quote }}, key: token } }
    {{- else if .adminInsecureNoToken }}
    # Explicitly no admin token: anything that reaches the admin port reads audit entries and approves calls.
    - { name: AGENTS_CHAIN_ADMIN_INSECURE_NO_TOKEN, value: "true" }
    {{- end }}
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

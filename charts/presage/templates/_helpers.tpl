{{/* Labels on every object: presage's own, plus Helm's bookkeeping. */}}
{{- define "presage.labels" -}}
app.kubernetes.io/part-of: presage
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* The scaler's selector: its name and the release, so two releases never select each other's pods. */}}
{{- define "presage.scaler.selector" -}}
app.kubernetes.io/name: {{ .Values.scaler.name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "presage.forecaster.selector" -}}
app.kubernetes.io/name: {{ .Values.forecaster.name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* image: repository:tag, the tag defaulting to the chart's appVersion (dict "image" ... "appVersion"
... "value" the repository's values path "build" how the image is built "example" a repository name).
No registry publishes presage's images, so an unset repository fails the render with what to do. */}}
{{- define "presage.image" -}}
{{- $missing := printf "%s is not set: no registry publishes presage's images. Build %s, push it where your cluster pulls from, and set it, e.g. --set %s=registry.example.com/%s" .value .build .value .example -}}
{{ required $missing .image.repository }}:{{ .image.tag | default .appVersion }}
{{- end }}

{{/* Where the scaler mounts its TLS Secrets. */}}
{{- define "presage.grpcTLSDir" -}}/etc/presage/grpc-tls{{- end }}
{{- define "presage.grpcClientCADir" -}}/etc/presage/grpc-client-ca{{- end }}
{{- define "presage.httpTLSDir" -}}/etc/presage/http-tls{{- end }}

{{/* One NetworkPolicy peer: the namespace of that name. */}}
{{- define "presage.namespacePeer" -}}
- namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: {{ . }}
{{- end }}

{{/* The ServiceAccount the scaler runs as: serviceAccount.name, by default the scaler's name. */}}
{{- define "presage.serviceAccountName" -}}
{{ .Values.serviceAccount.name | default .Values.scaler.name }}
{{- end }}

{{/* The Secret cert-manager writes the serving certificate to (certManager.enabled). */}}
{{- define "presage.certSecret" -}}
{{ .Values.scaler.name }}-tls
{{- end }}

{{/* The Secret each listener serves TLS from: its own tls.secretName, else cert-manager's when
certManager covers it, else none (plaintext). */}}
{{- define "presage.grpcTLSSecret" -}}
{{- if .Values.scaler.grpc.tls.secretName -}}
{{ .Values.scaler.grpc.tls.secretName }}
{{- else if and .Values.certManager.enabled .Values.certManager.grpc -}}
{{ include "presage.certSecret" . }}
{{- end -}}
{{- end }}
{{- define "presage.httpTLSSecret" -}}
{{- if .Values.scaler.http.tls.secretName -}}
{{ .Values.scaler.http.tls.secretName }}
{{- else if and .Values.certManager.enabled .Values.certManager.http -}}
{{ include "presage.certSecret" . }}
{{- end -}}
{{- end }}

{{/* "true" when the chart may render the cluster-scoped object (dict "root" $ "apiVersion" ... "kind"
... "name" ...): it does not exist, or it carries this release's ownership (Helm then updates or adopts
it). One applied by kubectl or owned by another release is left to its owner rather than failing the
install. Without a cluster (helm template, lint) nothing exists; nothing is looked up while the kind
is not served yet, since lookup fails on an unknown kind. */}}
{{- define "presage.ours" -}}
{{- $existing := dict -}}
{{- if .root.Capabilities.APIVersions.Has (printf "%s/%s" .apiVersion .kind) -}}
{{- $existing = lookup .apiVersion .kind "" .name -}}
{{- end -}}
{{- $labels := dig "metadata" "labels" dict $existing -}}
{{- $annotations := dig "metadata" "annotations" dict $existing -}}
{{- if or (not $existing)
  (and (eq (get $labels "app.kubernetes.io/managed-by") "Helm")
       (eq (get $annotations "meta.helm.sh/release-name") .root.Release.Name)
       (eq (get $annotations "meta.helm.sh/release-namespace") .root.Release.Namespace)) -}}
true
{{- end -}}
{{- end }}

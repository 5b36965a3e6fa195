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

{{/* image: repository:tag, the tag defaulting to the chart's appVersion. */}}
{{- define "presage.image" -}}
{{ .image.repository }}:{{ .image.tag | default .appVersion }}
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

{{/* Labels of every object of one service. Call with (dict "root" $ "component" "detector"). */}}
{{- define "flotilla.labels" -}}
app.kubernetes.io/name: flotilla-{{ .component }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: flotilla
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end }}

{{/* The image reference. */}}
{{- define "flotilla.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* A service's peer address by Service DNS name. Call with (dict "root" $ "component" "scheduler" "port" 7102). */}}
{{- define "flotilla.peer" -}}
http://flotilla-{{ .component }}.{{ .root.Release.Namespace }}.svc:{{ .port }}
{{- end }}

{{/*
ServiceAccount, ClusterRoleBinding, (Role)Binding, Deployment, Service and PodDisruptionBudget of
one service, mirroring deploy/manifests/<component>.yaml. Call with (dict "root" $ "component"
"detector" "grpc" 7101 "metrics" 9101 "values" .Values.detector "args" (list ...) "role" true).
*/}}
{{- define "flotilla.service" -}}
{{- $root := .root -}}
{{- $name := printf "flotilla-%s" .component -}}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "flotilla.labels" . | nindent 4 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {{ $name }}
  labels:
    {{- include "flotilla.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {{ $name }}
subjects:
- kind: ServiceAccount
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
---
{{- if .role }}
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "flotilla.labels" . | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: {{ $name }}
subjects:
- kind: ServiceAccount
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
---
{{- end }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "flotilla.labels" . | nindent 4 }}
spec:
  replicas: {{ .values.replicas }}
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ $name }}
  template:
    metadata:
      labels:
        {{- include "flotilla.labels" . | nindent 8 }}
    spec:
      serviceAccountName: {{ $name }}
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      containers:
      - name: {{ .component }}
        image: {{ include "flotilla.image" $root }}
        imagePullPolicy: {{ $root.Values.image.pullPolicy }}
        command: ["/usr/local/bin/{{ $name }}"]
        args:
        - --grpc-addr=0.0.0.0:{{ .grpc }}
        - --metrics-addr=0.0.0.0:{{ .metrics }}
        {{- range .args }}
        - {{ . }}
        {{- end }}
        - --log-format={{ $root.Values.logFormat }}
        - --log-level={{ $root.Values.logLevel }}
        {{- range .values.extraArgs }}
        - {{ . }}
        {{- end }}
        env:
        - name: POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        - name: POD_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        - name: OTEL_EXPORTER_OTLP_ENDPOINT
          value: {{ $root.Values.otlp.endpoint | quote }}
        {{- with $root.Values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        ports:
        - name: grpc
          containerPort: {{ .grpc }}
          protocol: TCP
        - name: metrics
          containerPort: {{ .metrics }}
          protocol: TCP
        readinessProbe:
          httpGet:
            path: /readyz
            port: metrics
          periodSeconds: 5
          failureThreshold: 3
        livenessProbe:
          httpGet:
            path: /livez
            port: metrics
          initialDelaySeconds: 10
          periodSeconds: 10
          failureThreshold: 6
        resources:
          {{- toYaml .values.resources | nindent 10 }}
        securityContext:
          {{- toYaml $root.Values.securityContext | nindent 10 }}
      {{- with $root.Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "flotilla.labels" . | nindent 4 }}
spec:
  selector:
    app.kubernetes.io/name: {{ $name }}
  ports:
  - name: grpc
    port: {{ .grpc }}
    targetPort: grpc
    protocol: TCP
  - name: metrics
    port: {{ .metrics }}
    targetPort: metrics
    protocol: TCP
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "flotilla.labels" . | nindent 4 }}
spec:
  maxUnavailable: {{ $root.Values.podDisruptionBudget.maxUnavailable }}
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ $name }}
{{- end }}

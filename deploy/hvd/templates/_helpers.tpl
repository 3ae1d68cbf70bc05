{{/*
Helpers of the hvd chart. Only functions Helm has and deploy/render/render.go
implements under the same names (include, default, trunc, trimSuffix, quote,
toYaml, nindent, mul, int, fail, required, randAlphaNum, empty).
*/}}

{{/* Every object's name starts with this: at most 40 characters, so the
worker pods' host names (<fullname>-worker-<index>) stay within 63. */}}
{{- define "hvd.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{- define "hvd.labels" -}}
app.kubernetes.io/name: hvd
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | quote }}
{{- end -}}

{{- define "hvd.workerSelector" -}}
app.kubernetes.io/name: hvd
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/component: worker
{{- end -}}

{{- define "hvd.launcherSelector" -}}
app.kubernetes.io/name: hvd
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/component: launcher
{{- end -}}

{{/* The Secret holding the job token. */}}
{{- define "hvd.tokenSecret" -}}
{{- default (printf "%s-token" (include "hvd.fullname" .)) .Values.jobToken.existingSecret -}}
{{- end -}}

{{/* The launcher's headless Service: its pod's name for the agents. */}}
{{- define "hvd.launcherService" -}}
{{- include "hvd.fullname" . }}-launcher
{{- end -}}

{{/* The workers' headless Service: <pod>.<this> names each worker pod. */}}
{{- define "hvd.workerService" -}}
{{- include "hvd.fullname" . }}-workers
{{- end -}}

{{/* Number of processes: replicas * slots, both checked. */}}
{{- define "hvd.np" -}}
{{- if lt (int .Values.worker.replicas) 1 }}{{ fail "worker.replicas must be at least 1" }}{{ end -}}
{{- if lt (int .Values.worker.slots) 1 }}{{ fail "worker.slots must be at least 1" }}{{ end -}}
{{- mul .Values.worker.replicas .Values.worker.slots -}}
{{- end -}}

{{/* The image of every container. */}}
{{- define "hvd.image" -}}
image: {{ printf "%s:%s" .Values.image.repository (toString .Values.image.tag) | quote }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
{{- end -}}

{{/* The job token, from the Secret. */}}
{{- define "hvd.tokenEnv" -}}
- name: HVD_JOB_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ include "hvd.tokenSecret" . }}
      key: {{ .Values.jobToken.existingSecretKey | default "token" }}
{{- end -}}

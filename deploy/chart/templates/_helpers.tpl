{{/*
The controller's image: repository@digest, or repository:tag (the chart's
appVersion by default). Empty without a repository: no Deployment then.
*/}}
{{- define "tether.image" -}}
{{- with .Values.image -}}
{{- if .repository -}}
{{- if .digest -}}
{{- printf "%s@%s" .repository .digest -}}
{{- else -}}
{{- printf "%s:%s" .repository (toString (.tag | default $.Chart.AppVersion)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
maxBreakGlassTTL in seconds, read as `tether install --max-break-glass-ttl`
reads it: numbers with units d, h, m, s (`1h30m`), longer than zero.
*/}}
{{- define "tether.ttlSeconds" -}}
{{- $ttl := toString .Values.maxBreakGlassTTL | trim -}}
{{- if not (regexMatch "^([0-9]+[dhms])+$" $ttl) -}}
{{- fail (printf "maxBreakGlassTTL %q: expected a time like 2h, 30m, 90s, 1d or 1h30m" $ttl) -}}
{{- end -}}
{{- $seconds := dict "d" 86400 "h" 3600 "m" 60 "s" 1 -}}
{{- $total := 0 -}}
{{- range regexFindAll "[0-9]+[dhms]" $ttl -1 -}}
{{- $count := regexFind "^[0-9]+" . | atoi -}}
{{- $unit := get $seconds (trimPrefix (regexFind "^[0-9]+" .) .) -}}
{{- $total = add $total (mul $count $unit) -}}
{{- end -}}
{{- if eq (int64 $total) 0 -}}
{{- fail (printf "maxBreakGlassTTL %q: must be longer than zero" $ttl) -}}
{{- end -}}
{{- $total -}}
{{- end -}}

{{/*
A number of seconds as Tether writes a time to live: 1d2h, 30m, 90s → 1m30s.
*/}}
{{- define "tether.formatTTL" -}}
{{- $left := int64 . -}}
{{- $text := "" -}}
{{- range list (list "d" 86400) (list "h" 3600) (list "m" 60) (list "s" 1) -}}
{{- $count := div $left (index . 1) -}}
{{- if gt $count 0 -}}
{{- $text = printf "%s%d%s" $text $count (index . 0) -}}
{{- $left = mod $left (index . 1) -}}
{{- end -}}
{{- end -}}
{{- $text | default "0s" -}}
{{- end -}}

{{/*
A CEL string literal, as Tether quotes one: a JSON string (Go's JSON
escapes <, > and & where Tether's does not; CEL reads both the same).
*/}}
{{- define "tether.cel" -}}
{{- toJson (toString .) | replace "\\u003c" "<" | replace "\\u003e" ">" | replace "\\u0026" "&" -}}
{{- end -}}

{{/*
The label naming the controller namespace an object was installed for
(`tether uninstall` deletes by it).
*/}}
{{- define "tether.installLabel" -}}
tether.dev/install-namespace: {{ .Release.Namespace | quote }}
{{- end -}}

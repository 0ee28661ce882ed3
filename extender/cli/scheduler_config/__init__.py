"""A KubeSchedulerConfiguration judged as kube-scheduler of one version judges it when it starts
(``python -m extender check-scheduler-config``; ``check.check`` runs the stages in kube-scheduler's order).

Go's own readers, so that the file means what it means to kube-scheduler:
  goyaml, gojson       the file as sigs.k8s.io/yaml (go-yaml v2) or encoding/json reads it
  godecode, types      JSON values into kube-scheduler's Go types (as plain data), strictly
  gobase64, goduration, gopem   Go's base64, time.ParseDuration and encoding/pem, errors included
kube-scheduler's stages:
  loading              apiVersion and kind, strict decoding, plugin args (loadConfig, DecodeNestedObjects)
  defaults             the defaults applied before validation (v1 defaults.go, default_plugins.go)
  validation, plugin_args, names, fielderrors   ValidateKubeSchedulerConfiguration and each plugin's args
  extenders, tls       building the extenders: TLS material, managed resources ignored by the scheduler
  framework, registry  building each profile from the in-tree plugins of that version
The project's own judgement:
  extra_rules          stricter than kube-scheduler where the extender cannot work, and warnings
  policy_match         with --policy: what the function serving the policy would refuse
  findings, versions   what a check reports; the versions judged and how they are written
"""

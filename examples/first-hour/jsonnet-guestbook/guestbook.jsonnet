// The guestbook as a function of top-level arguments, as `jsonnet
// --tla-str name=guestbook` (Argo CD's `tlas`) would call it.
function(name, replicas=1, image='gcr.io/heptio-images/ks-guestbook-demo:0.2')
  local labels = { app: name };
  [
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: name },
      spec: {
        replicas: replicas,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels: labels },
          spec: {
            containers: [{
              name: name,
              image: image,
              ports: [{ containerPort: 80 }],
            }],
          },
        },
      },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: name },
      spec: {
        ports: [{ port: 80, targetPort: 80 }],
        selector: labels,
      },
    },
  ]

package conditions_test

import "sigs.k8s.io/controller-runtime/pkg/client"

func clientKey(o client.Object) client.ObjectKey { return client.ObjectKeyFromObject(o) }

package render

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

//! The admission policy that makes a rollback's `spec.pin.by` the API
//! server's word, not free text: a pin is written (or changed) only in the
//! name of the user writing it, as `tether rollback` does after a
//! SelfSubjectReview. Removing a pin (the controller when Git matches,
//! `tether rollback --clear`) and writes that leave it as it is are not
//! judged.

use serde_json::{Value, json};

/// The policy's (and its binding's) name.
pub const PIN_POLICY: &str = "tether-rollback-pin";

/// The policy and its binding.
pub fn manifests() -> Vec<Value> {
    vec![
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": PIN_POLICY},
        "spec": {"failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["tether.dev"], "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE"], "resources": ["applications"]}]},
            "matchConditions": [
                {"name": "spec-only", "expression": "!has(request.subResource) || request.subResource == ''"},
                {"name": "pinned", "expression": "has(object.spec.pin)"}],
            "validations": [{
                "expression": "(request.operation == 'UPDATE' && has(oldObject.spec.pin) && object.spec.pin == oldObject.spec.pin) || (has(object.spec.pin.by) && object.spec.pin.by == request.userInfo.username)",
                "messageExpression": "'Application ' + object.metadata.namespace + '/' + object.metadata.name + ': spec.pin.by must be the requesting user (' + request.userInfo.username + '); roll back with tether rollback'"}]}}),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": PIN_POLICY},
            "spec": {"policyName": PIN_POLICY, "validationActions": ["Deny"]}}),
    ]
}

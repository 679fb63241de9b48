//! Which tensor a safetensors header is wrong about. The `safetensors` crate refuses a tensor
//! whose shape and dtype do not fill its byte range, or whose size overflows, without naming it
//! (`invalid shape, data type, or offset for tensor`); this reads the same header to say which
//! tensor and why.

use serde_json::Value;

/// The first tensor, in the order of their data, whose shape and dtype disagree with its
/// `data_offsets`, as ``tensor `NAME`: ...``; `None` if the header cannot be read that far or no
/// tensor is at fault.
pub fn fault(bytes: &[u8]) -> Option<String> {
    let len = usize::try_from(u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?)).ok()?;
    let header: Value = serde_json::from_slice(bytes.get(8..8usize.checked_add(len)?)?).ok()?;
    let mut tensors: Vec<(&String, &Value)> =
        header.as_object()?.iter().filter(|(name, _)| *name != "__metadata__").collect();
    let offsets = |info: &Value| -> Option<(u64, u64)> {
        let o = info.get("data_offsets")?.as_array()?;
        Some((o.first()?.as_u64()?, o.get(1)?.as_u64()?))
    };
    tensors.sort_by_key(|(_, info)| offsets(info));
    for (name, info) in tensors {
        let (start, end) = offsets(info)?;
        let dtype: safetensors::Dtype = serde_json::from_value(info.get("dtype")?.clone()).ok()?;
        let shape: Vec<u64> =
            info.get("shape")?.as_array()?.iter().map(Value::as_u64).collect::<Option<_>>()?;
        // In u128, where the crate's `usize` arithmetic overflowed.
        let bits = shape.iter().fold(dtype.bitsize() as u128, |n, &d| n.saturating_mul(d as u128));
        let span = end.checked_sub(start).map(u128::from);
        if bits % 8 != 0 || span != Some(bits / 8) {
            let held = match span {
                Some(n) => format!("hold {n}"),
                None => "end before they start".to_string(),
            };
            return Some(format!(
                "tensor `{name}`: shape {shape:?} of {dtype:?} needs {} bytes, but its \
                 data_offsets [{start}, {end}] {held}",
                bits.div_ceil(8)
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(header: &str) -> Vec<u8> {
        let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
        bytes.extend_from_slice(header.as_bytes());
        bytes.extend_from_slice(&[0; 64]);
        bytes
    }

    #[test]
    fn the_tensor_whose_shape_does_not_fill_its_bytes_is_named() {
        let ok = r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"#;
        let bad = r#""b.weight":{"dtype":"F32","shape":[3,2],"data_offsets":[8,24]}}"#;
        let found = fault(&file(&format!("{ok}{bad}"))).unwrap();
        assert_eq!(
            found,
            "tensor `b.weight`: shape [3, 2] of F32 needs 24 bytes, but its data_offsets \
             [8, 24] hold 16"
        );
        let huge = r#"{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}}"#;
        assert!(fault(&file(huge)).unwrap().starts_with("tensor `w`: shape"));
        let fine = r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
        assert_eq!(fault(&file(fine)), None);
    }
}

//! Embeddings as NumPy `.npy` files, for comparing with the Python stack (`lector models embed`).

/// A C-order float32 `rows` x `cols` matrix in NumPy's .npy format (version 1.0).
///
/// # Panics
/// If `data` does not hold `rows * cols` values.
pub fn f32_matrix(data: &[f32], rows: usize, cols: usize) -> Vec<u8> {
    assert_eq!(data.len(), rows * cols, "matrix data and shape disagree");
    let mut header =
        format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    // Magic (6) + version (2) + header length (2) + header + newline: a multiple of 64 bytes.
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let mut bytes = Vec::with_capacity(10 + header.len() + data.len() * 4);
    bytes.extend_from_slice(b"\x93NUMPY\x01\x00");
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    for v in data {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_padded_to_64_bytes_and_data_follows_little_endian() {
        let bytes = f32_matrix(&[1.0, -2.5], 1, 2);
        assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
        let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        assert_eq!((10 + header_len) % 64, 0);
        let header = std::str::from_utf8(&bytes[10..10 + header_len]).unwrap();
        assert!(header.contains("'shape': (1, 2)"), "{header}");
        assert!(header.ends_with('\n'));
        let data = &bytes[10 + header_len..];
        assert_eq!(
            data,
            [1.0f32.to_le_bytes(), (-2.5f32).to_le_bytes()].concat()
        );
    }
}

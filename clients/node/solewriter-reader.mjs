/**
 * ES module face of the reference hook reader: re-exports `solewriter-reader.js` (CommonJS)
 * unchanged. See that file for the API and its guarantees.
 */
import reader from './solewriter-reader.js';

export const {
  FORMAT,
  MAX_DOCUMENT_BYTES,
  TUPLE_FIELDS,
  COVERAGE_KEYS,
  STATUSES,
  REASONS,
  ReaderError,
  InvalidTupleError,
  NotPublishedError,
  UnsafePathError,
  ReadFailedError,
  TooLargeError,
  InvalidDocumentError,
  ForeignDocumentError,
  canonicalBytes,
  targetId,
  currentPath,
  parseDocument,
  statusAt,
  coverageAt,
  readBytes,
  readCurrent,
} = reader;
export default reader;

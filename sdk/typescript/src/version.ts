/** This SDK's version, sent in the worker's hello and in the `x-tickwheel-sdk` header; package.json's `version`. */
export const VERSION = "0.1.0";
